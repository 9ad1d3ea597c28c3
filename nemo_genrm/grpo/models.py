"""``tiny://`` model names: tiny offline models built on first use, for the demo and tests.

Grammar: ``tiny://<kind>[/<text>][?<field>=<value>&...]``

- ``tiny://policy``: a tiny random-weight Qwen2 (hidden 64, 2 layers, seed 0);
- ``tiny://judge``: the same architecture with other random weights (seed 6, picked because its
  probability of the label "1" sits mid-range, about 0.6-0.8, and moves with the answer; with
  ``reward.kind: probability`` the rewards then vary, which the demo needs);
- ``tiny://random``: a random tiny model with the defaults of
  :class:`nemo_genrm.testing.TinyModelSpec` (seed 0);
- ``tiny://fixed/<text>``: a judge that always answers ``<text>`` (e.g. ``tiny://fixed/1``);
- ``tiny://<kind>`` for a kind offered by an installed package under the entry-point group
  :data:`TINY_MODELS_GROUP` (a function returning the built model's folder), or registered at run
  time with :func:`register_tiny_model`: this package's own ``pyproject.toml`` offers the demo's
  ``tiny://demo-judge`` (its trained judge of single-digit additions) and ``tiny://demo-policy``
  (its briefly supervised policy). The driver thus offers the demo's models without importing
  the demo, which sits above it.

Query fields set :class:`~nemo_genrm.testing.TinyModelSpec` fields, e.g.
``tiny://policy?seed=3&arch=llama``. Models are built by :mod:`nemo_genrm.testing`'s cache
(``$NEMO_GENRM_CACHE``, else ``~/.cache/nemo_genrm/tiny``) and reused by later runs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from nemo_genrm.config import ConfigError

__all__ = ["TINY_MODELS_GROUP", "TINY_SCHEME", "is_tiny", "register_tiny_model", "resolve_model_name"]

TINY_SCHEME = "tiny://"
_ALIAS_SEEDS = {"policy": 0, "judge": 6, "random": 0}
_BUILT_IN = (*_ALIAS_SEEDS, "fixed")
TINY_MODELS_GROUP = "nemo_genrm.tiny_models"
"""Entry-point group of ``tiny://<kind>`` builders (name: the kind; value: ``module:function``)."""
# kind -> a function returning the built model's folder, registered at run time.
_REGISTERED: dict[str, Callable[[], str | os.PathLike]] = {}


def _builder(kind: str) -> Callable[[], str | os.PathLike] | None:
    """The builder of ``tiny://<kind>``: registered at run time, else an installed entry point."""
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    for point in entry_points(group=TINY_MODELS_GROUP):
        if point.name == kind:
            return point.load()
    return None


def register_tiny_model(kind: str, build: Callable[[], str | os.PathLike]) -> None:
    """Offer ``tiny://<kind>`` (no fields, no text) as the folder ``build()`` returns.

    Registering a kind again replaces its builder, so a caller may register on every run.

    Args:
        kind: The name after ``tiny://``.
        build: Builds the model on first use (cached by the caller) and returns its folder.

    Raises:
        ValueError: ``kind`` is one of the built-in kinds.
    """
    if kind in _BUILT_IN:
        raise ValueError(f"tiny://{kind} is built in; register another kind")
    _REGISTERED[kind] = build


def is_tiny(name: str | None) -> bool:
    """Whether ``name`` uses the ``tiny://`` scheme."""
    return bool(name) and str(name).startswith(TINY_SCHEME)


def _spec_fields(query: str, name: str) -> dict[str, Any]:
    from nemo_genrm.testing import TinyModelSpec

    types = {f.name: f.type for f in dataclasses.fields(TinyModelSpec)}
    fields: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in types:
            raise ConfigError(f"{name}: unknown tiny model field {key!r}; valid: {', '.join(sorted(types))}")
        try:
            fields[key] = int(value) if types[key] in ("int", int) else value
        except ValueError:
            raise ConfigError(f"{name}: field {key!r} needs an integer, got {value!r}") from None
    return fields


def resolve_model_name(name: str) -> str:
    """Turn a ``tiny://`` name into the folder of the built model; other names pass through.

    Args:
        name: A model name from the config.

    Returns:
        A local folder (built on first use) or ``name`` unchanged.

    Raises:
        ConfigError: The ``tiny://`` name is malformed.
    """
    if not is_tiny(name):
        return name
    from nemo_genrm.testing import cached_tiny_judge, cached_tiny_model

    parts = urlsplit(name)
    kind, text = parts.netloc, unquote(parts.path.lstrip("/"))
    fields = _spec_fields(parts.query, name)
    build = None if kind in _BUILT_IN or text else _builder(kind)
    if build is not None:
        if fields:
            raise ConfigError(f"{name}: tiny://{kind} takes no fields")
        return str(build())
    try:
        if kind == "fixed":
            if not text:
                raise ConfigError(f"{name}: write the fixed answer after the kind, e.g. tiny://fixed/1")
            return str(cached_tiny_judge(text, **fields))
        if kind in _ALIAS_SEEDS and not text:
            return str(cached_tiny_model(**{"seed": _ALIAS_SEEDS[kind], **fields}))
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from exc
    offered = sorted({*_REGISTERED, *(point.name for point in entry_points(group=TINY_MODELS_GROUP))})
    registered = "".join(f", tiny://{k}" for k in offered)
    raise ConfigError(
        f"{name}: unknown tiny model; use tiny://policy, tiny://judge, tiny://random, tiny://fixed/<text>{registered}"
    )
