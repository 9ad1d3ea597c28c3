"""Rows of a data file or a hub dataset split: the one reader for training data and RewardBench.

A local file is JSONL (one object per line), JSON (a list of objects, or an object of
equal-length column lists) or Parquet; each row comes back as a dict, in file order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from nemo_genrm.errors import ConfigError


def read_rows(
    path: str | Path, *, setting: str = "data.path", error: Callable[[str], Exception] = ConfigError
) -> list[dict[str, Any]]:
    """Rows of a local JSONL, JSON or Parquet file.

    Args:
        path: The file.
        setting: The config key that named the file (the messages start with it).
        error: The exception type raised, given the message (each caller keeps its own type:
            :class:`~nemo_genrm.errors.ConfigError` for training data, ``RewardBenchDataError``
            for RewardBench).

    Returns:
        One dict per row.

    Raises:
        Exception: Of type ``error``: a missing file, an unknown suffix, or content that is not rows.
    """
    path = Path(path)
    if not path.is_file():
        raise error(f"{setting}: data file {str(path)!r} not found (the path does not exist or is not a file)")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return list(_read_jsonl(path, error))
    if suffix == ".json":
        return _rows_from_json(json.loads(path.read_text(encoding="utf-8")), path, error)
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise error(f"{setting}: {str(path)!r} must end in .jsonl, .json or .parquet")


def read_hub_rows(
    name: str, split: str, *, hint: str, error: Callable[[str], Exception] = ConfigError
) -> list[dict[str, Any]]:
    """Rows of one split of a hub dataset (``datasets.load_dataset``).

    Args:
        name: The dataset's hub id.
        split: The split.
        hint: What to do instead (ends the message when the hub cannot give the split).
        error: The exception type raised, given the message (as for :func:`read_rows`).

    Returns:
        One dict per row.

    Raises:
        Exception: Of type ``error``: the hub cannot give the split (offline, no such split...).
    """
    import datasets

    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as err:  # the hub raises many types (offline, missing split, auth)
        raise error(
            f"could not load hub dataset {name!r} split {split!r}: {type(err).__name__}: {err}; {hint}"
        ) from err
    return [dict(row) for row in ds]


def _read_jsonl(path: Path, error: Callable[[str], Exception]) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise error(f"{path}: line {line_no} is not valid JSON ({err})") from err
            if not isinstance(row, dict):
                raise error(f"{path}: line {line_no} is not a JSON object")
            yield row


def _rows_from_json(data: Any, path: Path, error: Callable[[str], Exception]) -> list[dict[str, Any]]:
    if isinstance(data, list):
        if not all(isinstance(row, dict) for row in data):
            raise error(f"{path}: a JSON list must hold one object per row")
        return data
    if isinstance(data, dict) and data and all(isinstance(v, list) for v in data.values()):
        lengths = {k: len(v) for k, v in data.items()}
        if len(set(lengths.values())) != 1:
            raise error(f"{path}: column lists differ in length: {lengths}")
        names = list(data)
        return [dict(zip(names, values, strict=True)) for values in zip(*data.values(), strict=True)]
    raise error(f"{path}: expected a list of row objects or an object of column lists")
