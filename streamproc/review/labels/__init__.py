"""The reviewers' labels back in: the labels loop (labels joined with review items) and
the accuracy loop (the judge's live accuracy per cell, drift alerts)."""
