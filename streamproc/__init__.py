"""streamproc: a streaming groundedness monitor for live LLM assistants.

Kept import-light on purpose: importing the package must not pull in aiokafka,
so the judge stays usable offline.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
