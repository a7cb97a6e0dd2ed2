"""The gate's Kafka side: the request / reply loop and the HTTP path's record sink."""

from streamproc.stream.gate.loop import GateRequestLoop
from streamproc.stream.gate.sink import KafkaRecordSink

__all__ = ["GateRequestLoop", "KafkaRecordSink"]
