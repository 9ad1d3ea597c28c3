"""RewardBench examples: loading from the hub or a local file, validation, filtering.

The columns are those of the ``allenai/reward-bench`` dataset (split ``filtered``): ``prompt``,
``chosen``, ``rejected`` (text), ``subset`` (name) and ``id``. Other columns (``chosen_model``,
``rejected_model``) are ignored. A local file may be JSONL (one object per line), JSON (a list
of objects, or an object of equal-length column lists) or Parquet.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.config import ConfigError, RewardBenchDataConfig
from nemo_genrm.files.rows import read_hub_rows, read_rows

logger = logging.getLogger(__name__)

TEXT_COLUMNS = ("prompt", "chosen", "rejected", "subset")
REQUIRED_COLUMNS = ("id", *TEXT_COLUMNS)
_MAX_PROBLEMS_SHOWN = 20


class RewardBenchDataError(ValueError):
    """The RewardBench data cannot be used as given (missing file, bad rows, unknown subsets)."""


@dataclass(frozen=True)
class RewardBenchExample:
    """One RewardBench comparison.

    Attributes:
        id: The example id as stored (an int in the hub dataset).
        subset: The subset name, e.g. ``alpacaeval-easy``.
        prompt: The user request.
        chosen: The preferred response.
        rejected: The dispreferred response.
        turns: Earlier turns of a conversation, user and assistant alternating, before ``prompt``
            (the two-turn examples of the prior preference sets); empty for one turn.
    """

    id: Any
    subset: str
    prompt: str
    chosen: str
    rejected: str
    turns: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The id as text (how ids are compared, e.g. when resuming)."""
        return str(self.id)


# ------------------------------------------------------------------------------------ reading
HUB_HINT = (
    "without a hub, download the dataset elsewhere and set data.path to a local JSONL/JSON/Parquet "
    "file with the same columns"
)


# --------------------------------------------------------------------------------- validation
def rows_to_examples(rows: Sequence[Mapping[str, Any]], source: str = "data") -> list[RewardBenchExample]:
    """Validate rows and turn them into examples.

    Args:
        rows: Dicts with the RewardBench columns.
        source: Where the rows came from, for messages.

    Returns:
        The examples, in row order.

    Raises:
        RewardBenchDataError: Listing every bad row (its index, id and the column at fault) and
            any duplicated id.
    """
    problems: list[str] = []
    examples = []
    first_row: dict[str, int] = {}
    for index, row in enumerate(rows):
        where = f"row {index}" + (f" (id {row['id']!r})" if row.get("id") is not None else "")
        row_problems = [f"{where}: missing column {c!r}" for c in REQUIRED_COLUMNS if row.get(c) is None]
        row_problems += [
            f"{where}: column {c!r} must be text, got {type(row[c]).__name__}"
            for c in TEXT_COLUMNS
            if row.get(c) is not None and not isinstance(row[c], str)
        ]
        if not row_problems and str(row["id"]) in first_row:
            row_problems.append(f"{where}: id {row['id']!r} already used by row {first_row[str(row['id'])]}")
        problems += row_problems
        if not row_problems:
            first_row[str(row["id"])] = index
            turns = tuple(str(t) for t in row.get("turns") or ())
            examples.append(RewardBenchExample(**{c: row[c] for c in REQUIRED_COLUMNS}, turns=turns))
    if problems:
        shown = problems[:_MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        tail = [f"... and {more} more"] if more else []
        raise RewardBenchDataError(
            "\n".join(
                [f"{source}: {len(problems)} bad row(s); needed columns: {', '.join(REQUIRED_COLUMNS)}", *shown, *tail]
            )
        )
    return examples


def select(
    examples: Sequence[RewardBenchExample], subsets: Iterable[str] | None = None, limit: int | None = None
) -> list[RewardBenchExample]:
    """Keep the named subsets, then the first ``limit`` examples.

    Raises:
        ConfigError: A requested subset is not in the data (the message lists those that are).
    """
    if subsets is not None:
        wanted = list(dict.fromkeys(subsets))
        present = list(dict.fromkeys(ex.subset for ex in examples))
        missing = [s for s in wanted if s not in present]
        if missing:
            raise ConfigError(
                [f"data.subsets: {', '.join(missing)} not in the data; subsets present: {', '.join(present)}"]
            )
        keep = set(wanted)
        examples = [ex for ex in examples if ex.subset in keep]
    return list(examples[:limit] if limit is not None else examples)


def load_examples(cfg: RewardBenchDataConfig) -> list[RewardBenchExample]:
    """Load, validate and filter the examples a config asks for.

    ``data.path`` wins over ``data.hf_name`` when both are set.

    Args:
        cfg: The ``data`` section.

    Returns:
        The examples to judge.

    Raises:
        RewardBenchDataError: The data cannot be read or has bad rows.
        ConfigError: ``data.subsets`` names a subset the data lacks.
    """
    if cfg.path:
        rows, source = read_rows(cfg.path, error=RewardBenchDataError), str(cfg.path)
    elif cfg.hf_name:
        rows = read_hub_rows(cfg.hf_name, cfg.split, hint=HUB_HINT, error=RewardBenchDataError)
        source = f"{cfg.hf_name}[{cfg.split}]"
    else:
        raise ConfigError(["set data.path (a local file) or data.hf_name (a hub dataset)"])
    examples = rows_to_examples(rows, source)
    if cfg.pref_sets:
        examples += load_pref_sets(cfg)
    examples = select(examples, cfg.subsets, cfg.limit)
    logger.info("loaded %d RewardBench examples from %s", len(examples), source)
    return examples


# ------------------------------------------------------------------------------ prior sets
PREF_SETS_LEFT_OUT = ("pku_better", "pku_safer")  # no longer part of the benchmark (the reference drops them)
MAX_MESSAGES = 4  # the reference keeps conversations of at most 4 messages, the last one judged


def load_pref_sets(cfg: RewardBenchDataConfig) -> list[RewardBenchExample]:
    """The prior preference sets, from ``data.pref_sets_path`` or every split of the hub dataset.

    As in the reference, each hub split is a subset, ``pku_*`` are left out, and a conversation
    longer than :data:`MAX_MESSAGES` messages (response included) is dropped (counted in the
    log). A list-valued ``prompt`` holds the messages before the response; a two-turn one keeps
    its first exchange in ``turns``. Ids become ``<subset>:<id>`` so they cannot clash with
    RewardBench's.

    Raises:
        RewardBenchDataError: The data cannot be read or has bad rows.
    """
    if cfg.pref_sets_path:
        rows = read_rows(cfg.pref_sets_path, setting="data.pref_sets_path", error=RewardBenchDataError)
        source = str(cfg.pref_sets_path)
    else:
        rows, source = _load_hub_splits(cfg.pref_sets_hf_name), cfg.pref_sets_hf_name
    kept, dropped = [], 0
    for row in rows:
        if row.get("subset") in PREF_SETS_LEFT_OUT:
            continue
        row = pref_set_row(row)
        if row is None:
            dropped += 1
        else:
            kept.append(row)
    if dropped:
        logger.info(
            "prior sets: %d conversations longer than %d messages left out, as the reference does",
            dropped,
            MAX_MESSAGES,
        )
    return rows_to_examples(kept, source)


def pref_set_row(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """A prior-set row in RewardBench's columns, or ``None`` for a conversation the reference drops."""
    out = dict(row)
    out["id"] = f"{row.get('subset')}:{row.get('id')}"
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        contents = [m.get("content") if isinstance(m, Mapping) else m for m in prompt]
        if len(contents) + 1 > MAX_MESSAGES or len(contents) not in (1, 3):
            return None
        out["prompt"], out["turns"] = contents[-1], contents[:-1]
    return out


def _load_hub_splits(name: str) -> list[dict[str, Any]]:
    try:
        import datasets

        splits = datasets.load_dataset(name)
    except Exception as err:  # the hub raises many types (offline, missing split, auth)
        raise RewardBenchDataError(
            f"cannot load {name!r} from the hub: {type(err).__name__}: {err}. Without a hub, set "
            "data.pref_sets_path to a local JSONL/JSON/Parquet file with a subset column"
        ) from err
    return [{**dict(row), "subset": split} for split, ds in splits.items() for row in ds]


def write_examples(path: str | Path, examples: Iterable[RewardBenchExample]) -> Path:
    """Write examples as JSONL with the RewardBench columns.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for ex in examples:
            f.write(json.dumps(asdict(ex), ensure_ascii=False) + "\n")
    return path
