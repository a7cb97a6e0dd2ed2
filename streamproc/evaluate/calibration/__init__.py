"""Offline training of the verdict calibrator: licensed data in, a small model out.

Not imported by the judge or the stream; ``modelwork/train_calibrator.py`` drives it.
"""
