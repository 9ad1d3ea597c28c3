"""Loading YAML configs the NeMo-RL way and turning validation errors into one readable error.

Semantics kept from NeMo-RL (``nemo_rl/utils/config.py``):

- ``defaults:`` names one parent file or a list of them, relative to the child file; parents are
  merged in order (later wins), then the child on top. A mapping with ``_override_: true``
  replaces the inherited mapping instead of merging into it.
- Overrides use Hydra's grammar: ``a.b=1`` changes an existing key (an unknown key is an error),
  ``+a.b=1`` adds a key, ``++a.b=1`` adds or replaces, ``~a.b`` deletes.
- ``${...}`` interpolation is resolved when the config is turned into plain containers.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf
from pydantic import BaseModel, ValidationError

from nemo_genrm.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

_OVERRIDE_MARKER = "_override_"


# ------------------------------------------------------------------------------------ loading
def _merge(base: DictConfig, child: DictConfig) -> DictConfig:
    """Merge ``child`` over ``base``, honouring ``_override_: true`` on child mappings."""
    for key in list(child.keys()):
        value = child[key]
        if isinstance(value, DictConfig) and value.get(_OVERRIDE_MARKER, False):
            value.pop(_OVERRIDE_MARKER)
            if key in base:
                base.pop(key)
    return typing.cast(DictConfig, OmegaConf.merge(base, child))


def _load_with_defaults(path: Path, chain: tuple[Path, ...] = ()) -> DictConfig:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if path.resolve() in chain:
        cycle = " -> ".join(str(p) for p in (*chain, path.resolve()))
        raise ConfigError(f"defaults form a cycle: {cycle}")
    cfg = OmegaConf.load(path)
    if not isinstance(cfg, DictConfig):
        raise ConfigError(f"{path}: the top level must be a mapping, got a list")
    if "defaults" not in cfg:
        return cfg
    defaults = cfg.pop("defaults")
    names = [str(defaults)] if isinstance(defaults, str) else [str(d) for d in defaults]
    merged = OmegaConf.create({})
    for name in names:
        parent = Path(name) if Path(name).is_absolute() else path.parent / name
        merged = _merge(merged, _load_with_defaults(parent, (*chain, path.resolve())))
    return _merge(merged, cfg)


def load_config(path: str | Path, overrides: Iterable[str] = ()) -> DictConfig:
    """Load a YAML config with ``defaults:`` inheritance and apply Hydra-style overrides.

    Args:
        path: The YAML file.
        overrides: Strings such as ``env.genrm.judge.model_name=/ckpt``, ``+logger.tag=x``,
            ``++a.b=1`` or ``~a.b``.

    Returns:
        The merged config (interpolations unresolved; see :func:`to_container`).

    Raises:
        ConfigError: The file is missing, the defaults form a cycle, or an override is malformed
            or names a key that does not exist (with the closest existing names).
    """
    cfg = _load_with_defaults(Path(path))
    apply_overrides(cfg, list(overrides))
    return cfg


def apply_overrides(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """Apply Hydra override strings to ``cfg`` in place (see :func:`load_config`)."""
    if not overrides:
        return cfg
    # Hydra's parser is what NeMo-RL uses; importing it lazily keeps `import nemo_genrm` light.
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    problems = []
    for text in overrides:
        try:
            parsed = parser.parse_overrides(overrides=[text])
        except HydraException as exc:
            problems.append(f"override {text!r} cannot be parsed: {str(exc).splitlines()[0]}")
            continue
        try:
            OmegaConf.set_struct(cfg, True)
            ConfigLoaderImpl._apply_overrides_to_config(overrides=parsed, cfg=cfg)
        except (HydraException, ValueError, KeyError) as exc:
            problems.append(_explain_override_failure(cfg, text, exc))
        finally:
            OmegaConf.set_struct(cfg, False)
    if problems:
        raise ConfigError(problems, source="overrides")
    return cfg


def _explain_override_failure(cfg: DictConfig, text: str, exc: Exception) -> str:
    key = text.lstrip("+~").split("=", 1)[0].strip()
    if not text.startswith(("+", "~")):
        # Find the first segment of the key that the config lacks and suggest its neighbours.
        node: Any = cfg
        parts = key.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(node, DictConfig) or part not in node:
                missing = ".".join(parts[: depth + 1])
                hint = _suggest(part, [str(k) for k in node.keys()]) if isinstance(node, DictConfig) else ""
                return (
                    f"override {text!r}: {missing!r} does not exist in the config{hint}; "
                    f"write '+{text}' to add it or '++{text}' to add or replace"
                )
            node = node[part]
    return f"override {text!r}: {str(exc).splitlines()[0]}"


def to_container(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """Resolve interpolations and return plain dicts and lists."""
    if isinstance(cfg, dict):
        return cfg
    try:
        return typing.cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))
    except Exception as exc:  # omegaconf raises several interpolation error types
        raise ConfigError(f"interpolation failed: {exc}") from exc


# --------------------------------------------------------------------------------- validation
def validate(model: type[M], data: Any, *, prefix: str = "") -> M:
    """Validate ``data`` against a config model, reporting every problem at once.

    Args:
        model: The pydantic model class of the section.
        data: A dict, a DictConfig, or an instance of ``model`` (returned as is).
        prefix: Dotted path of the section, used in messages (e.g. ``env.genrm``).

    Returns:
        The validated model.

    Raises:
        ConfigError: Listing each problem with its path, the value seen and how to fix it.
    """
    if isinstance(data, model):
        return data
    if isinstance(data, (DictConfig, ListConfig)):
        data = to_container(data)
    if data is None:
        data = {}
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [line for err in exc.errors() for line in _explain(model, err, prefix)]
        raise ConfigError(problems) from None


def _explain(model: type[BaseModel], err: Any, prefix: str) -> list[str]:
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in (prefix, *loc) if p != "") or "<root>"
    kind = err["type"]
    if kind == "extra_forbidden":
        valid = _fields_at(model, loc[:-1])
        return [f"{path}: unknown key{_suggest(str(loc[-1]), valid)}; valid keys: {', '.join(valid)}"]
    if kind == "missing":
        return [f"{path}: required but missing; add it to the config"]
    if kind == "value_error":
        # Our cross-field checks raise ValueError with '; '-joined sentences.
        msg = str(err["msg"]).removeprefix("Value error, ")
        return [f"{path}: {part}" for part in msg.split("; ")]
    seen = err.get("input")
    hint = ""
    if kind == "literal_error":
        hint = f"; choose one of {err['ctx']['expected']}"
    return [f"{path}: {err['msg']} (got {seen!r}){hint}"]


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=2, cutoff=0.5)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the sub-model reached by following ``loc`` from ``model``."""
    current: Any = model
    for part in loc:
        current = _model_in(current)
        if current is None or not isinstance(part, str) or part not in current.model_fields:
            return []
        current = current.model_fields[part].annotation
    current = _model_in(current)
    return sorted(current.model_fields) if current is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
