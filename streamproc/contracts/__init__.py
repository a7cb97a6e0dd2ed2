"""The records streamproc reads and writes (answers, verdicts, labels, gate messages, audit
records) and the JSON Schema, AsyncAPI and OpenAPI documents made from them.
"""

__all__: list[str] = []
