"""Entry points: the `streamproc` command and the processes it starts. Only these, `config` and
`wiring` read the settings.
"""

__all__: list[str] = []
