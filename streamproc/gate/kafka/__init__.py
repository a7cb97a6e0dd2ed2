"""The gate's Kafka side: the request / reply loop and the HTTP path's record sink."""

from streamproc.gate.kafka.loop import GateRequestLoop
from streamproc.gate.kafka.sink import KafkaRecordSink

__all__ = ["GateRequestLoop", "KafkaRecordSink"]
