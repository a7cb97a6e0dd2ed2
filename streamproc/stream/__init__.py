"""The stream shell around the pure judge: two aiokafka consumer loops (judging,
windows), the topics, and the pure stages they run.

Importing this package is cheap; Kafka clients are made only when a loop runs.
"""

__all__: list[str] = []
