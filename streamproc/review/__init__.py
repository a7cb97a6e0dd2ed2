"""The review loop: the review page, labels joined with verdicts, the judge's live accuracy,
and label files in and out.
"""

__all__: list[str] = []
