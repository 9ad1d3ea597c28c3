"""Loading YAML configs the NeMo-RL way and turning validation errors into one readable error.

Semantics kept from NeMo-RL (``nemo_rl/utils/config.py``):

- ``defaults:`` names one parent file or a list of them, relative to the child file; parents are
  merged in order (later wins), then the child on top. A mapping with ``_override_: true``
  replaces the inherited mapping instead of merging into it. A caller may name further folders
  to look in (``search``) for a parent that is not next to its child.
- Overrides use Hydra's grammar: ``a.b=1`` changes an existing key (an unknown key is an error),
  ``+a.b=1`` adds a key, ``++a.b=1`` adds or replaces, ``~a.b`` deletes.
- ``${...}`` interpolation is resolved when the config is turned into plain containers.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import types
import typing
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
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


def _parent_path(child: Path, name: str, search: Sequence[Path]) -> Path:
    """The file a ``defaults:`` entry of ``child`` names: next to ``child``, else in ``search``."""
    if Path(name).is_absolute():
        return Path(name)
    candidates = [child.parent / name, *(Path(folder) / name for folder in search)]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise ConfigError(_missing_parent(child, name, candidates))
    return found


def _load_with_defaults(path: Path, chain: tuple[Path, ...] = (), search: Sequence[Path] = ()) -> DictConfig:
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
        parent = _parent_path(path, name, search)
        merged = _merge(merged, _load_with_defaults(parent, (*chain, path.resolve()), search))
    return _merge(merged, cfg)


def _missing_parent(child: Path, name: str, candidates: Sequence[Path]) -> str:
    """Where a ``defaults:`` entry was looked for, why there, and what to write instead."""
    looked = ", ".join(str(c.resolve()) for c in candidates)
    message = (
        f"defaults: {name!r} in {child} was looked for at {looked}, and there is no such file: a "
        f"defaults path is relative to the folder of the file that names it "
        f"({child.resolve().parent}), or absolute"
    )
    beside_cwd = Path.cwd() / name
    if not Path(name).is_absolute() and beside_cwd.is_file():
        relative = os.path.relpath(beside_cwd, child.resolve().parent)
        message += f"; the {name!r} of the current folder is defaults: {relative}"
    return message


def load_config(
    path: str | Path,
    overrides: Iterable[str] = (),
    *,
    schema: type[BaseModel] | None = None,
    search: Sequence[str | Path] = (),
) -> DictConfig:
    """Load a YAML config with ``defaults:`` inheritance and apply Hydra-style overrides.

    Args:
        path: The YAML file.
        overrides: Strings such as ``env.genrm.judge.model_name=/ckpt``, ``+logger.tag=x``,
            ``++a.b=1`` or ``~a.b``.
        schema: The config model the file is validated against. With it, ``key=value`` sets any
            key the schema defines, whether or not the YAML spells it out (see
            :func:`apply_overrides`); without it, only keys present in the YAML.
        search: Folders where a relative ``defaults:`` entry is looked for when it is not next
            to the file naming it (``--engine nemo_rl`` passes the installed NeMo-RL's
            ``examples/configs``).

    Returns:
        The merged config (interpolations unresolved; see :func:`to_container`).

    Raises:
        ConfigError: The file is missing, the defaults form a cycle, or an override is malformed
            or names a key that does not exist (with the closest existing names). With a schema,
            the same error also lists every problem of the values (the file with the overrides
            that did apply), so a bad override does not hide the rest.
    """
    cfg = _load_with_defaults(Path(path), search=tuple(Path(folder) for folder in search))
    try:
        apply_overrides(cfg, list(overrides), schema=schema)
    except ConfigError as err:
        if schema is None:
            raise
        problems = list(err.problems)
        try:
            validate(schema, to_container(cfg))
        except ConfigError as more:
            problems += [p for p in more.problems if p not in problems]
        raise ConfigError(problems) from None
    return cfg


def apply_overrides(cfg: DictConfig, overrides: list[str], *, schema: type[BaseModel] | None = None) -> DictConfig:
    """Apply Hydra override strings to ``cfg`` in place (see :func:`load_config`).

    The grammar and its meaning are NeMo-RL's (Hydra's), applied as if the YAML were merged onto
    the schema's defaults (Hydra's structured configs): ``key=value`` changes a key the YAML or
    the schema defines; ``+key=value`` adds a key neither defines (a free-form section such as
    ``judge.vllm.extra_kwargs``, or a config read without a schema); ``++`` adds or replaces;
    ``~key`` deletes. The defaults themselves are not written into ``cfg``, so a validated
    section still knows which fields the user set.

    Args:
        cfg: The loaded config, changed in place.
        overrides: The override strings.
        schema: The config model ``cfg`` is validated against, or ``None``.

    Returns:
        ``cfg``.

    Raises:
        ConfigError: Listing every override that cannot be parsed or applied; an unknown key is
            named with the closest valid keys.
    """
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
            if schema is not None and _schema_key_absent(cfg, schema, parsed[0]):
                # The schema defines the key: set it as Hydra sets a structured config's default.
                parsed = parser.parse_overrides(overrides=["++" + text])
        except HydraException as exc:
            problems.append(f"override {text!r} cannot be parsed: {str(exc).splitlines()[0]}")
            continue
        try:
            OmegaConf.set_struct(cfg, True)
            ConfigLoaderImpl._apply_overrides_to_config(overrides=parsed, cfg=cfg)
        except (HydraException, ValueError, KeyError) as exc:
            problems.append(_explain_override_failure(cfg, text, exc, schema))
        finally:
            OmegaConf.set_struct(cfg, False)
    if problems:
        raise ConfigError(problems, source="overrides")
    return cfg


def _schema_key_absent(cfg: DictConfig, schema: type[BaseModel], override: Any) -> bool:
    """Whether a plain ``key=value`` names a key the schema defines and the config lacks."""
    if override.is_add() or override.is_force_add() or override.is_delete():
        return False
    key = override.key_or_group
    return OmegaConf.select(cfg, key, default=_ABSENT) is _ABSENT and _schema_defines(schema, key.split("."))


_ABSENT = object()


def _schema_defines(schema: type[BaseModel], parts: list[str]) -> bool:
    """Whether every segment of a dotted key is a field of the schema's nested sections."""
    current: type[BaseModel] | None = schema
    for part in parts:
        if current is None or part not in current.model_fields:
            return False
        current = _model_in(current.model_fields[part].annotation)
    return True


def _explain_override_failure(cfg: DictConfig, text: str, exc: Exception, schema: type[BaseModel] | None) -> str:
    key = text.lstrip("+~").split("=", 1)[0].strip()
    if text.startswith(("+", "~")):
        return f"override {text!r}: {str(exc).splitlines()[0]}"
    # Find the first segment of the key that neither the config nor the schema has, and suggest
    # its neighbours from both.
    node: Any = cfg
    section: type[BaseModel] | None = schema
    parts = key.split(".")
    for depth, part in enumerate(parts):
        in_cfg = isinstance(node, DictConfig) and part in node
        in_schema = section is not None and part in section.model_fields
        if not (in_cfg or in_schema):
            missing = ".".join(parts[: depth + 1])
            in_node = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
            choices = sorted({*in_node, *(section.model_fields if section is not None else ())})
            hint = _suggest(part, choices)
            if section is not None and section.model_config.get("extra") == "forbid":
                return f"override {text!r}: {missing!r} does not exist{hint}; valid keys: {', '.join(choices)}"
            return (
                f"override {text!r}: {missing!r} does not exist in the config{hint}; "
                f"write '+{text}' to add it or '++{text}' to add or replace"
            )
        node = node[part] if in_cfg else None
        section = _model_in(section.model_fields[part].annotation) if in_schema and section is not None else None
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
# While validate() collects, a section's cross-field check records its problems here instead of
# raising, so the sections around it still validate and run their own checks.
_DEFERRED: ContextVar[list[tuple[BaseModel, list[str]]] | None] = ContextVar("nemo_genrm_deferred_checks", default=None)
# Rounds of setting invalid values aside before the cross-field checks give up (each round
# handles every field error found; errors only surface in a later round behind a required key).
_REPAIR_ROUNDS = 4


def report_problems(section: BaseModel, problems: Sequence[str]) -> None:
    """Report a section's cross-field problems (call from its ``mode="after"`` validator).

    Outside :func:`validate` the problems are raised at once as one ``ValueError`` (pydantic
    locates it at the section); inside it they are collected with the section's path, so a config
    with field errors still gets every cross-field problem in the same :class:`ConfigError`.
    Each problem should name the fields it reads (see :func:`validate`).

    Args:
        section: The validated section (``self``).
        problems: One sentence per problem, naming fields relative to the section.

    Raises:
        ValueError: There are problems and no :func:`validate` call is collecting them.
    """
    if not problems:
        return
    collected = _DEFERRED.get()
    if collected is None:
        raise SectionProblems(problems)
    collected.append((section, list(problems)))


class SectionProblems(ValueError):
    """A section's cross-field problems; pydantic locates it at the section, keeping the list."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def typed(model: type[M], value: Any, owner: str) -> M:
    """``value`` when it is already a ``model``; else a ``TypeError`` that says where dicts go.

    Inside the package configs travel typed: dicts are read (and every problem reported at
    once) at the public edges only, :func:`~nemo_genrm.judges.create_judge`,
    ``GenRMEnvironment`` and the entry points.

    Args:
        model: The config model class expected.
        value: What the caller passed.
        owner: Who takes it, for the message (e.g. ``"HttpJudge"``).

    Raises:
        TypeError: ``value`` is not a ``model``.
    """
    if isinstance(value, model):
        return value
    raise TypeError(
        f"{owner} takes a validated {model.__name__}, not {type(value).__name__}; build one with "
        f"{model.__name__}.model_validate(...), or pass the dict to create_judge, which validates it"
    )


def validate(model: type[M], data: Any, *, prefix: str = "") -> M:
    """Validate ``data`` against a config model, reporting every problem at once.

    Field problems (types, bounds, unknown or missing keys) and cross-field problems (the
    sections' own checks) come in one error. A cross-field check runs even where another field
    is invalid: that field is set aside (its default, or a placeholder for a required text) and
    the checks run on the rest; a check whose message names a field set aside is dropped, since
    it judged a stand-in rather than the user's value.

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
        errors = exc.errors()
    problems = [line for err in errors for line in _explain(model, err, prefix)]
    field_locs = [tuple(err["loc"]) for err in errors if not _is_section_check(model, err)]
    for line in _cross_field_problems(model, data, field_locs, prefix):
        if line not in problems:
            problems.append(line)
    raise ConfigError(problems)


def _is_section_check(model: type[BaseModel], err: Any) -> bool:
    """Whether a pydantic error is a section's cross-field check (a ValueError on a model)."""
    loc = tuple(err["loc"])
    return err["type"] == "value_error" and (not loc or _model_in(_annotation_at(model, loc)) is not None)


def _cross_field_problems(
    model: type[BaseModel], data: Any, field_locs: list[tuple[Any, ...]], prefix: str
) -> list[str]:
    """The cross-field problems of ``data`` with its invalid fields set aside (see validate)."""
    if not field_locs or not isinstance(data, dict):
        return []
    repaired = copy.deepcopy(data)
    set_aside: list[tuple[Any, ...]] = []
    pending = field_locs
    for _ in range(_REPAIR_ROUNDS):
        # Deepest first and list items from the end, so one removal does not move another.
        for loc in sorted(
            pending, key=lambda loc: (len(loc), loc[-1] if isinstance(loc[-1], int) else -1), reverse=True
        ):
            if not _set_aside(model, repaired, loc):
                return []
        set_aside += pending
        token = _DEFERRED.set([])
        try:
            instance = model.model_validate(repaired)
        except ValidationError as exc:
            pending = [tuple(err["loc"]) for err in exc.errors()]
            continue
        finally:
            collected = _DEFERRED.get() or []
            _DEFERRED.reset(token)
        paths = _section_paths(instance, ())
        lines = []
        for section, problems in collected:
            where = paths.get(id(section))
            if where is None:
                continue
            stand_ins = {str(loc[-1]) for loc in set_aside if loc[: len(where)] == where and len(loc) > len(where)}
            path = ".".join(str(p) for p in (prefix, *where) if p != "") or "<root>"
            lines += [
                f"{path}: {problem}"
                for problem in problems
                if not any(re.search(rf"\b{re.escape(name)}\b", problem) for name in stand_ins)
            ]
        return lines
    return []


def _set_aside(model: type[BaseModel], data: Any, loc: tuple[Any, ...]) -> bool:
    """Remove the value at ``loc`` (or put a stand-in for a required one); False if impossible."""
    if not loc:
        return False
    parent: Any = data
    for part in loc[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return True  # already removed with its parent
    last = loc[-1]
    owner = _model_in(_annotation_at(model, loc[:-1]))
    field = owner.model_fields.get(last) if owner is not None and isinstance(last, str) else None
    if field is None or not field.is_required():
        if isinstance(parent, dict):
            parent.pop(last, None)
        elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
            parent.pop(last)
        else:
            return False
        return True
    if not isinstance(parent, dict):
        return False
    stand_in = _STAND_INS.get(field.annotation) if _model_in(field.annotation) is None else {}
    if stand_in is None:
        return False
    parent[last] = stand_in
    return True


# What a required field that is missing or invalid holds while the cross-field checks run.
_STAND_INS: dict[Any, Any] = {str: "unset", int: 1, float: 1.0}


def _section_paths(section: Any, where: tuple[Any, ...]) -> dict[int, tuple[Any, ...]]:
    """id() of every section inside ``section`` (itself included) -> its location."""
    paths: dict[int, tuple[Any, ...]] = {}
    if isinstance(section, BaseModel):
        paths[id(section)] = where
        for name in type(section).model_fields:
            paths.update(_section_paths(getattr(section, name), (*where, name)))
    elif isinstance(section, (list, tuple)):
        for index, item in enumerate(section):
            paths.update(_section_paths(item, (*where, index)))
    elif isinstance(section, dict):
        for key, item in section.items():
            paths.update(_section_paths(item, (*where, key)))
    return paths


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
        raised = (err.get("ctx") or {}).get("error")
        if isinstance(raised, SectionProblems):
            return [f"{path}: {problem}" for problem in raised.problems]
        # Other checks raise ValueError with '; '-joined sentences.
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
    current = _model_in(_annotation_at(model, loc))
    return sorted(current.model_fields) if current is not None else []


def _annotation_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The annotation reached by following ``loc`` (field names, list indices, dict keys)."""
    current: Any = model
    for part in loc:
        section = _model_in(current)
        if section is not None:
            if not isinstance(part, str) or part not in section.model_fields:
                return None
            current = section.model_fields[part].annotation
            continue
        args = [a for a in typing.get_args(current) if a is not type(None)]
        origin = typing.get_origin(current)
        if origin in (list, tuple, dict) and args:
            current = args[-1]  # list/tuple items, dict values
        elif origin in (typing.Union, types.UnionType) and len(args) == 1:
            current = args[0]
        else:
            return None
    return current


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
