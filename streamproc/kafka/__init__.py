"""Everything that talks to Kafka: client options and security, the consumer-loop discipline
(fair reads, progress, transactions), changelogged state, the topic catalog and local
brokers for tests and the demo.
"""

__all__: list[str] = []
