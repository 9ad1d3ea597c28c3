"""Build tiny tokenizers, models and judges once and reuse them from a cache folder.

A cached artefact lives in ``<cache>/<kind>-<label>-<digest>``, where the digest hashes the
build arguments (defaults included), :data:`BUILDER_VERSION` and the tokenizer corpus, so a
change to any of them builds a fresh folder instead of reusing a stale one. Builds go into a
temporary folder next to the final one and are renamed into place, which is atomic on one
filesystem. A lock file beside it lets one process build at a time: another that asks for the
same artefact meanwhile waits for that build and reuses it (the demo judge trains for minutes;
a second run started meanwhile, or a test process beside a background build, waits instead of
training it again). Should the builder die, the lock is released and the next one builds.

The cache folder is ``$NEMO_GENRM_CACHE`` when set, else ``~/.cache/nemo_genrm/tiny``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from nemo_genrm.testing._corpus import CORPUS
from nemo_genrm.testing.models import TinyModelSpec, build_fixed_verdict_judge, build_tiny_model
from nemo_genrm.testing.tokenizer import build_tiny_tokenizer

logger = logging.getLogger(__name__)

# Bump when a builder's output changes for the same arguments (weights, files, template).
BUILDER_VERSION = 1
CACHE_ENV_VAR = "NEMO_GENRM_CACHE"
_DEFAULT_CACHE = Path("~/.cache/nemo_genrm/tiny")


def default_cache_dir() -> Path:
    """The cache folder: ``$NEMO_GENRM_CACHE`` if set, else ``~/.cache/nemo_genrm/tiny``.

    Returns:
        The folder as an absolute ``Path`` (it may not exist yet).
    """
    configured = os.environ.get(CACHE_ENV_VAR)
    return Path(configured or _DEFAULT_CACHE).expanduser().resolve()


def cached_tiny_tokenizer(*, cache_dir: str | os.PathLike | None = None) -> Path:
    """The tiny tokenizer, built on first use.

    Args:
        cache_dir: Cache folder; :func:`default_cache_dir` when ``None``.

    Returns:
        A folder that ``AutoTokenizer.from_pretrained`` loads.
    """
    return _cached("tokenizer", "chatml", {}, build_tiny_tokenizer, cache_dir)


def cached_tiny_model(*, cache_dir: str | os.PathLike | None = None, **spec: Any) -> Path:
    """A tiny random model (see :func:`build_tiny_model`), built on first use.

    Args:
        cache_dir: Cache folder; :func:`default_cache_dir` when ``None``.
        **spec: Fields of :class:`TinyModelSpec` (``arch``, ``hidden_size``, ``seed``, ...).

    Returns:
        A folder that ``AutoModelForCausalLM.from_pretrained`` and vLLM load.

    Raises:
        ValueError: If the spec is invalid.
    """
    model_spec = TinyModelSpec(**spec)
    fields = model_spec.to_dict()
    return _cached(
        "model",
        f"{model_spec.arch}-s{model_spec.seed}",
        fields,
        lambda path: build_tiny_model(path, **fields),
        cache_dir,
    )


def cached_tiny_judge(text: str, *, cache_dir: str | os.PathLike | None = None, **spec: Any) -> Path:
    """A fixed-verdict judge answering ``text`` (see :func:`build_fixed_verdict_judge`).

    Args:
        text: What the judge answers for every chat prompt.
        cache_dir: Cache folder; :func:`default_cache_dir` when ``None``.
        **spec: Fields of :class:`TinyModelSpec` (``arch``, ``hidden_size``, ``seed``, ...).

    Returns:
        A folder that ``AutoModelForCausalLM.from_pretrained`` and vLLM load.

    Raises:
        ValueError: If ``text`` cannot be a fixed verdict or the spec is invalid.
    """
    fields = TinyModelSpec(**spec).to_dict()
    label = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:24] or "empty"
    return _cached(
        "judge",
        f"{fields['arch']}-{label}",
        {"text": text, **fields},
        lambda path: build_fixed_verdict_judge(path, text, **fields),
        cache_dir,
    )


def cached_artifact(
    kind: str,
    label: str,
    args: dict[str, Any],
    build: Callable[[Path], Any],
    *,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """The cached folder of any builder, built atomically on first use (see the module docstring).

    Args:
        kind: Folder name prefix, e.g. ``"demo-judge"``.
        label: Readable part of the folder name.
        args: Everything that determines the build's output (hashed into the folder name).
        build: Writes the artefact into the folder it is given.
        cache_dir: Cache folder; :func:`default_cache_dir` when ``None``.

    Returns:
        The folder.
    """
    return _cached(kind, label, args, build, cache_dir)


def _digest(kind: str, args: dict[str, Any]) -> str:
    """Short hash of everything that determines a build's output."""
    payload = json.dumps(
        {
            "kind": kind,
            "args": args,
            "builder_version": BUILDER_VERSION,
            "corpus": hashlib.sha256(CORPUS.encode()).hexdigest(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _cached(
    kind: str,
    label: str,
    args: dict[str, Any],
    build: Callable[[Path], Any],
    cache_dir: str | os.PathLike | None,
) -> Path:
    """Return the cached folder for ``(kind, args)``, building it atomically if missing."""
    root = Path(cache_dir).expanduser().resolve() if cache_dir is not None else default_cache_dir()
    final = root / f"{kind}-{label}-{_digest(kind, args)}"
    if final.is_dir():
        return final
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(root / f".{final.name}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.info("Waiting for another process building %s into %s", kind, final)
        lock.acquire()
    try:
        if final.is_dir():  # built by the process that held the lock
            logger.debug("Another process built %s; using its copy", final)
            return final
        return _build(kind, final, build)
    finally:
        lock.release()


def _build(kind: str, final: Path, build: Callable[[Path], Any]) -> Path:
    root = final.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        build(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; other processes of the run may read it
        try:
            os.rename(tmp, final)
            logger.info("Built tiny %s into %s", kind, final)
        except OSError:
            if not final.is_dir():
                raise
            logger.debug("Another process built %s first; using its copy", final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
