"""Event-time windows: the spec, panes, state, the window loop and its reports."""

__all__: list[str] = []
