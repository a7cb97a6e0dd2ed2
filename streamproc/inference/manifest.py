"""The frozen description of one model, read from a TOML manifest in ``models/``.

A manifest says everything the loader needs and the audit trail keeps: where the ONNX
file and its tokenizer come from (an installed package or a local folder), their sha256,
the graph's input names, the longest sequence, how the outputs become scores, default
thresholds, licence status and provenance. Choosing another model is a manifest and a
config change, never a code change.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path, PurePosixPath
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "EmbeddingOutput",
    "FileSource",
    "ManifestError",
    "MarginOutput",
    "ModelInputs",
    "ModelManifest",
    "SoftmaxOutput",
    "load_manifest",
]

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="Lower-case hex digest.")]


class ManifestError(ValueError):
    """A manifest that cannot be read or does not validate; the message names the file."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FileSource(_Frozen):
    """One model file: ``path`` inside an installed ``package``, or inside ``local``, a
    folder relative to the manifest. Exactly one of ``package``/``local`` is set."""

    package: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    local: str | None = None
    path: str
    sha256: Sha256

    @field_validator("path", "local")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        # A manifest must not reach outside its package or folder.
        if value is not None:
            parts = PurePosixPath(value).parts
            if not parts or PurePosixPath(value).is_absolute() or ".." in parts:
                raise ValueError(f"{value!r} must be a relative path without '..'")
        return value

    @model_validator(mode="after")
    def _one_origin(self) -> FileSource:
        if (self.package is None) == (self.local is None):
            raise ValueError("set exactly one of 'package' or 'local'")
        return self

    @property
    def origin(self) -> str:
        """Where the file comes from, for messages: ``package:path`` or ``local/path``."""
        if self.package is not None:
            return f"{self.package}:{self.path}"
        return f"{self.local}/{self.path}"


class ModelInputs(_Frozen):
    """The graph's input names and the longest token sequence it accepts."""

    input_ids: str = "input_ids"
    attention_mask: str = "attention_mask"
    token_type_ids: str | None = None
    max_length: int = Field(ge=4, le=8192)


class MarginOutput(_Frozen):
    """Two logits read as a margin ``s = logit[positive] - logit[negative]`` through bands.

    ``contradiction = sigmoid(k (s - contradiction_above))`` and
    ``entailment = sigmoid(k (s - entailment_above)) * (1 - contradiction)``, for a model
    whose margin ranks neutral < entailment < contradiction.
    """

    kind: Literal["margin"]
    output_name: str = "logits"
    positive_index: int = Field(ge=0)
    negative_index: int = Field(ge=0)
    entailment_above: float
    contradiction_above: float
    steepness: float = Field(gt=0, description="k: how sharp the band edges are.")

    @model_validator(mode="after")
    def _consistent(self) -> MarginOutput:
        if self.positive_index == self.negative_index:
            raise ValueError("positive_index and negative_index must differ")
        if not self.entailment_above < self.contradiction_above:
            raise ValueError("entailment_above must be below contradiction_above")
        return self

    def accepts(self, logits: int) -> bool:
        """Whether a model with this many logits can be read this way."""
        return logits > max(self.positive_index, self.negative_index)


class SoftmaxOutput(_Frozen):
    """A k-way classifier: softmax over the logits, labelled in order."""

    kind: Literal["softmax"]
    output_name: str = "logits"
    labels: tuple[str, ...] = Field(min_length=2)
    entailment_label: str = "entailment"
    contradiction_label: str = "contradiction"

    @model_validator(mode="after")
    def _labels_present(self) -> SoftmaxOutput:
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"labels repeat: {list(self.labels)}")
        for label in (self.entailment_label, self.contradiction_label):
            if label not in self.labels:
                raise ValueError(f"label {label!r} is not among labels {list(self.labels)}")
        return self

    def accepts(self, logits: int) -> bool:
        """Whether a model with this many logits can be read this way."""
        return logits == len(self.labels)


class EmbeddingOutput(_Frozen):
    """Token states pooled into one sentence vector."""

    kind: Literal["embedding"]
    output_name: str = "last_hidden_state"
    pooling: Literal["mean"] = "mean"
    normalize: bool = True
    dimension: int = Field(ge=1)


Output = Annotated[MarginOutput | SoftmaxOutput | EmbeddingOutput, Field(discriminator="kind")]


class ModelManifest(_Frozen):
    """One model the judge may load (see ``models/README.md``)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    role: Literal["nli", "embedding"]
    description: str
    licence: str = Field(min_length=1)
    onnx: FileSource
    tokenizer: FileSource
    inputs: ModelInputs
    output: Output
    thresholds: dict[str, float] = Field(
        default_factory=dict, description="Default judge thresholds, by the judge's names."
    )
    batch_invariant: bool = Field(
        default=False,
        description="True when an input's output is bit-identical alone and inside any "
        "padded batch (activations quantised per token, not per call). Only such a model "
        "is run in batches: otherwise a verdict would depend on its batch neighbours.",
    )
    notes: str = ""

    @field_validator("thresholds")
    @classmethod
    def _finite(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [name for name, number in value.items() if not math.isfinite(number)]
        if bad:
            raise ValueError(f"thresholds must be finite: {bad}")
        return value

    @model_validator(mode="after")
    def _output_fits_role(self) -> ModelManifest:
        is_nli_output = self.output.kind in ("margin", "softmax")
        if (self.role == "nli") != is_nli_output:
            raise ValueError(f"role {self.role!r} cannot use output kind {self.output.kind!r}")
        return self


def load_manifest(path: Path) -> ModelManifest:
    """Read and validate one manifest; its ``name`` must equal the file's stem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ManifestError(f"{path}: cannot read manifest: {error}") from error
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{path}: not valid TOML: {error}") from error
    try:
        manifest = ModelManifest.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '<top>'}: {item['msg']}"
            for item in error.errors()
        )
        raise ManifestError(f"{path}: invalid manifest: {problems}") from error
    if manifest.name != path.stem:
        raise ManifestError(
            f"{path}: name {manifest.name!r} must match the file name {path.stem!r}"
        )
    return manifest
