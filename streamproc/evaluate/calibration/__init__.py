"""Offline training of the verdict calibrator: licensed data in, a small model out.

Not imported by the judge or the stream; ``scripts/train_calibrator.py`` drives it.
"""
