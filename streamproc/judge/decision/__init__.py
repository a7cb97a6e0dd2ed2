"""From claim signals to verdicts and actions: calibrators, the answer decision, actions."""
