"""What every ONNX backend holds and exposes: the verified model, its tokenizer, its
manifest and hash, how many inputs had to be truncated, and how its calls run.

With ``parallel_calls`` > 1 a backend runs its micro-batches side by side on a small
thread pool (ONNX Runtime releases the GIL, and a session may run concurrently). That is
how the int8 graphs keep one input per call - batch-invariant: they quantise activations
per call, so in a shared batch an input's result would move with its neighbours - and
still fill the cores: a one-input call is too small to spread over two intra-op threads,
two one-thread calls are not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from streamproc.inference.manifest import ModelManifest
from streamproc.inference.onnx_session import OnnxModel
from streamproc.inference.tokenize import TextTokenizer

_In = TypeVar("_In")
_Out = TypeVar("_Out")


class OnnxBackend:
    """Base of the NLI scorer and the embedder; subclasses check the output kind."""

    def __init__(
        self,
        model: OnnxModel,
        tokenizer: TextTokenizer,
        manifest: ModelManifest,
        sha256: str,
        *,
        output_name: str,
        batch_size: int,
        parallel_calls: int = 1,
        batch_tokens: int | None = None,
    ) -> None:
        if batch_tokens is not None and batch_tokens < 1:
            raise ValueError("batch_tokens must be at least 1")
        if parallel_calls < 1:
            raise ValueError("parallel_calls must be at least 1")
        if output_name not in model.output_names:
            raise ValueError(
                f"model {manifest.name!r} has no output {output_name!r} "
                f"(outputs: {list(model.output_names)})"
            )
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._model = model
        self._tokenizer = tokenizer
        self._manifest = manifest
        self._sha256 = sha256
        self._batch_size = batch_size
        self._parallel_calls = parallel_calls
        self._batch_tokens = batch_tokens
        self.truncated_total = 0
        self._pool = (
            ThreadPoolExecutor(max_workers=parallel_calls, thread_name_prefix=manifest.role)
            if parallel_calls > 1
            else None
        )

    def _chunks(self, lengths: Sequence[int]) -> list[list[int]]:
        """Input indices per call: sorted by length (little padding), at most
        ``batch_size`` per call, and at least one call per parallel slot while there are
        inputs for it - a short list in one big call would leave the other slots idle.
        With ``batch_tokens`` the calls are cut where their padded size would pass it (a
        longer input runs alone), unless that leaves a slot idle; then the list is split
        evenly as without it."""
        order = sorted(range(len(lengths)), key=lambda index: lengths[index])
        slots = min(len(order), self._parallel_calls)
        if self._batch_tokens is not None:
            chunks = _within_budget(order, lengths, self._batch_size, self._batch_tokens)
            if len(chunks) >= slots:
                return chunks
        calls = max(-(-len(order) // self._batch_size), slots)
        size = -(-len(order) // calls) if calls else 1
        return [order[start : start + size] for start in range(0, len(order), size)]

    def _map_calls(self, call: Callable[[_In], _Out], batches: Sequence[_In]) -> list[_Out]:
        """``call`` on each micro-batch, side by side when the backend has a pool; the
        results in order."""
        if self._pool is None or len(batches) < 2:
            return [call(batch) for batch in batches]
        return list(self._pool.map(call, batches))

    @property
    def model_name(self) -> str:
        return self._manifest.name

    @property
    def sha256(self) -> str:
        return self._sha256

    @property
    def manifest(self) -> ModelManifest:
        return self._manifest

    @property
    def max_length(self) -> int:
        return self._tokenizer.max_length

    @property
    def batch_size(self) -> int:
        return self._batch_size


def _within_budget(
    order: Sequence[int], lengths: Sequence[int], most: int, tokens: int
) -> list[list[int]]:
    """``order`` (ascending length) cut greedily into calls of at most ``most`` inputs
    whose padded size (inputs x the longest) stays within ``tokens``."""
    chunks: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and (len(current) == most or (len(current) + 1) * lengths[index] > tokens):
            chunks.append(current)
            current = []
        current.append(index)
    if current:
        chunks.append(current)
    return chunks
