"""The inline gate: an answer in, a decision back within the caller's latency budget.

- :mod:`.service`: requests judged in micro-batches within a budget, with admission and
  each tenant's failure policy; Kafka-free, as are :mod:`.request`, :mod:`.policy`,
  :mod:`.admission`, :mod:`.outbox` and the ports it reports through (:mod:`.sensor`,
  :mod:`.sink`, :mod:`.tracing`);
- :mod:`.http`: the aiohttp server (``POST /v1/check``) and its callers' tokens;
- :mod:`.kafka`: the request / reply loop on Kafka and its record sink;
- :mod:`.client`: the caller's side, over HTTP or Kafka;
- :mod:`.options`: the gate's settings group.
"""

__all__: list[str] = []
