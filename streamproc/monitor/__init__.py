"""The monitor: the judging loop, event-time windows, rates per key and burn-rate alerts, and
the Prometheus rules that page on them.
"""

__all__: list[str] = []
