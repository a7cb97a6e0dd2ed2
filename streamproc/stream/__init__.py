"""The stream shell: faust app, topics, agents and windows around the pure judge.

Importing this package is cheap; faust is imported only by :mod:`streamproc.stream.app`.
"""

__all__: list[str] = []
