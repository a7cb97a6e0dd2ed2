"""Level 2b: retrieval of the evidence worth asking, the NLI rounds, and the rule-based verdict."""
