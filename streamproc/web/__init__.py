"""What the HTTP servers share (gate, review page, metrics and health): the aiohttp runner,
connection limits, one-line errors, TLS and bearer-token files.
"""

__all__: list[str] = []
