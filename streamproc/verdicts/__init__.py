"""From an accepted answer to every record it produces, without Kafka: intake, the judging
stage, where the judge runs, output topics, size limits and dead letters. The worker and the
gate both use it.
"""

__all__: list[str] = []
