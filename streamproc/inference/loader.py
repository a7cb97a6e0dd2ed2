"""Load the configured NLI and embedding models: manifest, sha256 check, session.

All file I/O of the backends happens here, once per load; the scorer classes only take
what these functions built. Each file is hashed from the same bytes that are then used,
so a mismatch is refused before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from streamproc.inference.embeddings import OnnxEmbedder
from streamproc.inference.manifest import ModelManifest
from streamproc.inference.nli import OnnxNliScorer
from streamproc.inference.onnx_session import OnnxModel, open_session
from streamproc.inference.options import InferenceSettings
from streamproc.inference.registry import ModelRegistry
from streamproc.inference.tokenize import TextTokenizer

__all__ = ["LoadedModel", "load_embedder", "load_model", "load_nli"]


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A verified session and tokenizer for one manifest."""

    manifest: ModelManifest
    model: OnnxModel
    tokenizer: TextTokenizer
    sha256: str


def load_model(
    name: str,
    role: Literal["nli", "embedding"],
    settings: InferenceSettings,
    *,
    registry: ModelRegistry | None = None,
    make_symbolic: bool = True,
) -> LoadedModel:
    """Manifest ``name`` from the registry, its files verified, its session opened.

    ``make_symbolic=False`` keeps a pinned sequence axis (fixed-length padding); it
    exists for comparisons and benchmarks.
    """
    registry = registry or ModelRegistry(settings.models_dir)
    manifest = registry.get(name)
    if manifest.role != role:
        raise ValueError(f"model {name!r} has role {manifest.role!r}, not {role!r}")
    _, onnx_bytes = registry.read_verified(manifest.onnx)
    _, tokenizer_bytes = registry.read_verified(manifest.tokenizer)
    model = open_session(onnx_bytes, settings, manifest.inputs, make_symbolic=make_symbolic)
    tokenizer = TextTokenizer.from_json(
        tokenizer_bytes.decode("utf-8"), max_length=manifest.inputs.max_length
    )
    return LoadedModel(manifest, model, tokenizer, manifest.onnx.sha256)


def load_nli(
    settings: InferenceSettings,
    *,
    registry: ModelRegistry | None = None,
    make_symbolic: bool = True,
    replayable: bool = True,
) -> OnnxNliScorer:
    """The NLI cross-encoder ``settings.nli_model`` names, its session sized so that
    ``nli_parallel_calls`` calls at once use ``intra_op_threads`` threads together.
    ``replayable=False`` batches as asked even where a pair's score then depends on its
    neighbours: only for measuring what batching would give (the benchmark's ceiling)."""
    session_settings = _per_call(settings, settings.nli_parallel_calls)
    loaded = load_model(
        settings.nli_model, "nli", session_settings, registry=registry, make_symbolic=make_symbolic
    )
    return OnnxNliScorer(
        loaded.model,
        loaded.tokenizer,
        loaded.manifest,
        loaded.sha256,
        batch_size=(
            replayable_batch_size(loaded.manifest, settings.nli_batch_size)
            if replayable
            else settings.nli_batch_size
        ),
        parallel_calls=settings.nli_parallel_calls,
    )


def load_embedder(
    settings: InferenceSettings,
    *,
    registry: ModelRegistry | None = None,
    replayable: bool = True,
) -> OnnxEmbedder:
    """The sentence-embedding model ``settings.embedding_model`` names, sized like
    :func:`load_nli` (``embedding_parallel_calls`` calls share ``intra_op_threads``);
    ``replayable=False`` as there (only for measuring what unsafe batching would give)."""
    session_settings = _per_call(settings, settings.embedding_parallel_calls)
    loaded = load_model(settings.embedding_model, "embedding", session_settings, registry=registry)
    return OnnxEmbedder(
        loaded.model,
        loaded.tokenizer,
        loaded.manifest,
        loaded.sha256,
        batch_size=(
            replayable_batch_size(loaded.manifest, settings.embedding_batch_size)
            if replayable
            else settings.embedding_batch_size
        ),
        parallel_calls=settings.embedding_parallel_calls,
        batch_tokens=settings.embedding_batch_tokens,
    )


def replayable_batch_size(manifest: ModelManifest, requested: int) -> int:
    """``requested``, or 1 for a model not declared batch-invariant: with activations
    quantised per call, an input's output would move with its batch neighbours and a
    verdict could not be replayed on its own."""
    return requested if manifest.batch_invariant else 1


def _per_call(settings: InferenceSettings, parallel_calls: int) -> InferenceSettings:
    """The session settings of one of ``parallel_calls`` calls running side by side: an
    equal share of the intra-op threads, at least one."""
    per_call = max(1, settings.intra_op_threads // parallel_calls)
    return settings.model_copy(update={"intra_op_threads": per_call})
