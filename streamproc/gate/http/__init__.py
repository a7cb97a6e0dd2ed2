"""The gate's HTTP adapter: the server (``POST /v1/check``) and its caller tokens."""
