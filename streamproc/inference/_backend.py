"""What every ONNX backend holds and exposes: the verified model, its tokenizer, its
manifest and hash, and how many inputs had to be truncated."""

from __future__ import annotations

from streamproc.inference.manifest import ModelManifest
from streamproc.inference.onnx_session import OnnxModel
from streamproc.inference.tokenize import TextTokenizer


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
    ) -> None:
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
        self.truncated_total = 0

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
