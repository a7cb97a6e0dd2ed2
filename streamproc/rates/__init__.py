"""Trustworthy rates, pure: the judge's measured accuracy, the corrected rate behind a flag
rate, live accuracy against reviewers' labels, and small statistics.
"""

__all__: list[str] = []
