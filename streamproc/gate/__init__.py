"""The inline gate: an answer in, a decision back within the caller's latency budget.

The concept only - requests, the service that judges them in micro-batches with a
budget, admission and a failure policy, and the ports it reports through (sensor,
record sink, tracing). The HTTP server and the Kafka request loop that carry requests
to it live in the adapters and the stream layer; nothing here imports aiohttp or
aiokafka (``client.py`` aside: the caller's side of Kafka request / reply).
"""

from streamproc.gate.request import GateRequest, GateResult
from streamproc.gate.service import GateService

__all__ = ["GateRequest", "GateResult", "GateService"]
