"""Files that a kill cannot leave half-written: whole files by rename, logs by appended lines.

- :func:`write_atomic` writes a temporary file next to the target, flushes it to disk and
  renames it over the target, so a reader (or a resume) sees the old file or the new one,
  never a mix.
- :func:`read_jsonl` reads an append-only JSON-lines file, tolerating the torn last line that a
  kill in the middle of an append leaves.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["JsonlContents", "read_jsonl", "write_atomic", "write_json_atomic"]


def write_atomic(path: str | Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (temporary file, fsync, ``os.replace``).

    Args:
        path: The file to write; its folder must exist.
        text: The whole new content (UTF-8).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_json_atomic(path: str | Path, data: Any) -> None:
    """:func:`write_atomic` of ``data`` as indented JSON (non-JSON values as their ``str``)."""
    write_atomic(path, json.dumps(data, indent=2, default=str))


class JsonlContents:
    """What :func:`read_jsonl` found: the records, and whether the file needs repair.

    Attributes:
        records: The decoded lines that are JSON objects, in file order.
        lines: Their raw text, one per record (without the newline).
        dropped: Lines that could not be read (a torn tail, a corrupted line).
        clean: Whether every line was read and the file ends with a newline.
    """

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self.dropped = 0
        self.clean = True


def read_jsonl(path: str | Path) -> JsonlContents:
    """Read a JSON-lines file written by appends; a torn or corrupt line is skipped and counted.

    Args:
        path: The file; a missing file reads as empty.

    Returns:
        The records and whether the file was clean.
    """
    found = JsonlContents()
    path = Path(path)
    if not path.exists():
        return found
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        found.clean = False  # the last append did not finish
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            found.dropped += 1
            found.clean = False
            logger.warning("%s: line %d is not a JSON object (a torn write?); skipped", path, number)
            continue
        found.records.append(record)
        found.lines.append(line)
    return found


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
