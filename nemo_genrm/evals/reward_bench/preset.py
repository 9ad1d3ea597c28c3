"""``prompt.preset: rewardbench``: the judge prompts of an installed ``rewardbench`` package.

For exact parity the prompts are read from the package's own source, not copied here. The
package is never imported: ``import rewardbench`` pulls API SDKs and an old transformers pin.
Instead :func:`importlib.util.find_spec` locates it, ``rewardbench/generative.py`` is parsed
with :mod:`ast`, and the module-level assignments that hold the prompts are evaluated (string
literals, names bound to literals, dicts and ``+`` of strings; nothing is executed).

Variables read (names as in rewardbench 0.1.4 and 0.1.5, see docs/parity.md):

- pairwise: ``MTBENCH_V2["system_prompt"]`` (it names ``prompt_v2``) and
  ``MTBENCH_V2["prompt_template"]``, with fields ``{question}``, ``{answer_a}``, ``{answer_b}``.
  The reference sends both as a system and a user message.
- rating: ``ratings_prompt``, fields ``{prompt}`` and ``{completion}``; the reference sends it
  as the only (user) message.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.config import ConfigError
from nemo_genrm.prompts import JudgeTemplate

logger = logging.getLogger(__name__)

PACKAGE = "rewardbench"
INSTALL_HINT = "pip install --no-deps rewardbench"
PAIRWISE_VARIABLE = "MTBENCH_V2"
MULTI_TURN_VARIABLE = "MTBENCH_MULTI_V2"
MULTI_TURN_FIELDS = ("question_1", "question_2", "answer_a_1", "answer_b_1", "answer_a_2", "answer_b_2")
RATING_VARIABLE = "ratings_prompt"
PAIRWISE_FIELDS = ("question", "answer_a", "answer_b")
RATING_FIELDS = ("prompt", "completion")
_MAX_DEPTH = 16


@dataclass(frozen=True)
class RewardBenchPreset:
    """The reference's prompt for one protocol.

    Attributes:
        protocol: ``pairwise`` or ``rating``.
        template: The prompt as a :class:`~nemo_genrm.prompts.JudgeTemplate` (its fields are the
            reference's: ``question``/``answer_a``/``answer_b`` or ``prompt``/``completion``).
        version: The version of the source read (``unknown`` when it cannot be told).
        source: The file the prompt was read from.
        digest: ``sha256:`` of that file.
        multi_turn: Pairwise only: the reference's two-turn prompt (fields ``question_1``,
            ``question_2``, ``answer_a_1``, ``answer_b_1``, ``answer_a_2``, ``answer_b_2``), used
            for the two-turn conversations of the prior preference sets; ``None`` when absent.
    """

    protocol: str
    template: JudgeTemplate
    version: str
    source: str
    digest: str = ""
    multi_turn: JudgeTemplate | None = None

    def describe(self) -> dict[str, str]:
        """What the results record about the preset."""
        return {"preset": PACKAGE, "rewardbench_version": self.version, "source": self.source, "digest": self.digest}


# --------------------------------------------------------------------------------- locating
def find_package_dir() -> Path:
    """The directory of the installed ``rewardbench`` package, found without importing it.

    Raises:
        ConfigError: The package is not installed (the message says how to install it).
    """
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            [
                (
                    f"prompt.preset 'rewardbench' reads the prompts from the rewardbench package, which is "
                    f"not installed: run `{INSTALL_HINT}` (--no-deps: only its source is needed), or "
                    "drop prompt.preset to use this project's templates"
                )
            ]
        )
    return Path(next(iter(spec.submodule_search_locations)))


def package_version(package_dir: Path) -> str:
    """The version of the source actually read: ``__version__`` in the package's ``__init__.py``.

    The installed distribution's metadata is not consulted: another copy of the package earlier
    on ``sys.path`` (a checkout, a vendored copy) is what gets read, and its version is the one
    that matters. Read with :mod:`ast`, never imported.

    Returns:
        The version string, or ``unknown`` when ``__init__.py`` holds no literal ``__version__``.
    """
    init = package_dir / "__init__.py"
    if init.is_file():
        try:
            value = module_constant(init, "__version__")
        except ConfigError:
            return "unknown"
        if isinstance(value, str):
            return value
    return "unknown"


def source_digest(path: Path) -> str:
    """``sha256:<hex>`` of a source file, so a result names the exact prompt text used."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------ evaluation
def _bindings(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``name = expr`` assignments (the last one wins, as at import time)."""
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


def _evaluate(node: ast.expr, names: dict[str, ast.expr], where: str, depth: int = 0) -> Any:
    """Value of a literal expression that may name other module-level literals."""
    if depth > _MAX_DEPTH:
        raise ConfigError([f"{where}: names refer to each other too deeply (a cycle?)"])
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ConfigError([f"{where}: {node.id!r} is not a module-level constant"])
        return _evaluate(names[node.id], names, where, depth + 1)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ConfigError([f"{where}: dict unpacking (**) is not supported"])
        return {
            _evaluate(k, names, where, depth + 1): _evaluate(v, names, where, depth + 1)  # type: ignore[arg-type]
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_evaluate(e, names, where, depth + 1) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _evaluate(node.left, names, where, depth + 1)
        right = _evaluate(node.right, names, where, depth + 1)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    raise ConfigError(
        [f"{where}: unsupported expression {ast.dump(node)[:80]} (only literals, names of literals and string +)"]
    )


def module_constant(path: Path, name: str) -> Any:
    """Evaluate one module-level constant of a Python file without running the file.

    Args:
        path: The ``.py`` file.
        name: The variable.

    Returns:
        Its value.

    Raises:
        ConfigError: The file cannot be parsed, lacks the variable, or builds it with code.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError) as err:
        raise ConfigError([f"prompt.preset: cannot read {str(path)!r}: {err}"]) from err
    names = _bindings(tree)
    if name not in names:
        raise ConfigError([f"prompt.preset: {str(path)!r} defines no module-level {name!r}"])
    return _evaluate(names[name], names, f"prompt.preset: {path.name}:{name}")


# ---------------------------------------------------------------------------------- presets
def _check_fields(template: JudgeTemplate, expected: tuple[str, ...], where: str) -> None:
    if set(template.fields) != set(expected):
        raise ConfigError(
            [f"{where}: expected fields {', '.join(expected)}, found {', '.join(template.fields) or 'none'}"]
        )


def load_rewardbench_preset(protocol: str) -> RewardBenchPreset:
    """Read the reference's judge prompt for a protocol from the installed package.

    Args:
        protocol: ``pairwise`` or ``rating``.

    Returns:
        The template, the package version and the source file.

    Raises:
        ConfigError: The package is missing (install hint), or its source does not hold the
            expected variables and fields.
    """
    package_dir = find_package_dir()
    source = package_dir / "generative.py"
    if not source.is_file():
        raise ConfigError([f"prompt.preset: the rewardbench package at {package_dir} has no generative.py"])
    version = package_version(package_dir)
    where = f"prompt.preset: rewardbench {version} ({source.name})"
    multi_turn = None
    if protocol == "pairwise":
        template = _pair_template(source, PAIRWISE_VARIABLE, where)
        _check_fields(template, PAIRWISE_FIELDS, where)
        if MULTI_TURN_VARIABLE in _bindings(ast.parse(source.read_text(encoding="utf-8"))):
            multi_turn = _pair_template(source, MULTI_TURN_VARIABLE, where)
            _check_fields(multi_turn, MULTI_TURN_FIELDS, where)
    elif protocol == "rating":
        text = module_constant(source, RATING_VARIABLE)
        if not isinstance(text, str):
            raise ConfigError([f"{where}: {RATING_VARIABLE} must be a string"])
        template = JudgeTemplate(name=f"rewardbench:{RATING_VARIABLE}", system=None, user=text)
        _check_fields(template, RATING_FIELDS, where)
    else:
        raise ConfigError([f"protocol: {protocol!r} has no rewardbench preset; use pairwise or rating"])
    logger.info("using rewardbench %s %s prompt from %s", version, protocol, source)
    return RewardBenchPreset(
        protocol, template, version, str(source), digest=source_digest(source), multi_turn=multi_turn
    )


def _pair_template(source: Path, variable: str, where: str) -> JudgeTemplate:
    """A pairwise prompt dict (``system_prompt`` and ``prompt_template``) as a template."""
    spec = module_constant(source, variable)
    if not isinstance(spec, dict) or not all(
        isinstance(spec.get(k), str) for k in ("system_prompt", "prompt_template")
    ):
        raise ConfigError([f"{where}: {variable} must hold system_prompt and prompt_template strings"])
    return JudgeTemplate(
        name=f"rewardbench:{spec.get('name', variable)}", system=spec["system_prompt"], user=spec["prompt_template"]
    )


def reference_choice(text: str | None, markers: tuple[str, str] = ("[[A]]", "[[B]]")) -> str | None:
    """The reference's pairwise reading: ``[[A]]`` anywhere wins, then ``[[B]]`` (see :func:`reference_choice_of`)."""
    return reference_choice_of(text, markers)


_TRAILING_RATING = re.compile(r"(?<!\w)(10|[1-9])$")


def reference_rating(text: str | None) -> int | None:
    """The reference's rating rule: an integer from 1 to 10 standing alone at the very end.

    reward-bench's rating parser reads only a whole-word ``1``..``10`` that ends the reply
    (trailing whitespace aside); ``Rating: 7.`` or ``7/10`` hold no rating there. Used only
    with the preset, for parity.

    Args:
        text: The judge's reply.

    Returns:
        The rating, or ``None`` when the reply does not end with one.
    """
    if text is None:
        return None
    match = _TRAILING_RATING.search(text.strip())
    return int(match.group(1)) if match else None


# ------------------------------------------------------------------------------ RewardBench 2
V2_SOURCE = "generative_v2.py"
FOUR_WAY_FIELDS = ("question", "answer_a", "answer_b", "answer_c", "answer_d")
TIES_RATING_VARIABLE = "ratings_prompt_ties"


@dataclass(frozen=True)
class RewardBench2Preset:
    """The reference's RewardBench 2 prompts (``rewardbench/generative_v2.py``).

    Attributes:
        four_way: ``MTBENCH_V2`` there: system and user text with ``{question}`` and
            ``{answer_a}``..``{answer_d}``.
        ties: ``ratings_prompt_ties``: one user message with ``{prompt}`` and ``{completion}``.
        version: The version of the source read.
        source: The file read.
        digest: ``sha256:`` of that file.
    """

    four_way: JudgeTemplate
    ties: JudgeTemplate
    version: str
    source: str
    digest: str

    def describe(self) -> dict[str, str]:
        """What the results record about the preset."""
        return {"preset": PACKAGE, "rewardbench_version": self.version, "source": self.source, "digest": self.digest}


def load_rewardbench2_preset() -> RewardBench2Preset:
    """Read the RewardBench 2 prompts from the installed package's ``generative_v2.py``.

    Raises:
        ConfigError: The package is missing, or its source lacks the variables or fields.
    """
    package_dir = find_package_dir()
    source = package_dir / V2_SOURCE
    if not source.is_file():
        raise ConfigError([f"prompt.preset: the rewardbench package at {package_dir} has no {V2_SOURCE}"])
    version = package_version(package_dir)
    where = f"prompt.preset: rewardbench {version} ({source.name})"
    four_way = _pair_template(source, PAIRWISE_VARIABLE, where)
    _check_fields(four_way, FOUR_WAY_FIELDS, where)
    text = module_constant(source, TIES_RATING_VARIABLE)
    if not isinstance(text, str):
        raise ConfigError([f"{where}: {TIES_RATING_VARIABLE} must be a string"])
    ties = JudgeTemplate(name=f"rewardbench:{TIES_RATING_VARIABLE}", system=None, user=text)
    _check_fields(ties, RATING_FIELDS, where)
    logger.info("using rewardbench %s RewardBench 2 prompts from %s", version, source)
    return RewardBench2Preset(four_way, ties, version, str(source), source_digest(source))


def reference_choice_of(text: str | None, markers: tuple[str, ...]) -> str | None:
    """The reference's reading of a reply: the letter of the first marker listed that occurs in it.

    ``process_judgement`` in ``generative.py`` and ``generative_v2.py`` tests the markers in order
    (``[[A]]`` first) anywhere in the reply, ``<think>`` blocks included.

    Returns:
        ``"A"``, ``"B"``, ... (by marker position), or ``None``.
    """
    if text is None:
        return None
    for index, marker in enumerate(markers):
        if marker in text:
            return "ABCDEFGHIJ"[index]
    return None
