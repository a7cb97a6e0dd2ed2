"""The judging loop: intake, the judging stage, and where the judge runs."""
