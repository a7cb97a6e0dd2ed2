"""Checks that need no model: confidence, comparisons, overstatement, citations, rules."""
