"""Model registry and ONNX Runtime backends for the NLI judge.

Importing this package is light (manifests and the registry only); onnxruntime and
tokenizers load with ``streamproc.inference.loader``, which the judge imports only when
a model-backed judge is chosen.
"""

from streamproc.inference.manifest import ManifestError, ModelManifest, load_manifest
from streamproc.inference.registry import (
    MissingExtraError,
    ModelIntegrityError,
    ModelRegistry,
    ModelSourceError,
    UnknownModelError,
    default_models_dir,
    verify_sha256,
)

__all__ = [
    "ManifestError",
    "MissingExtraError",
    "ModelIntegrityError",
    "ModelManifest",
    "ModelRegistry",
    "ModelSourceError",
    "UnknownModelError",
    "default_models_dir",
    "load_manifest",
    "verify_sha256",
]
