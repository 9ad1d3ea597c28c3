"""The output directory of a RewardBench run: per-example records that survive interruptions.

``examples.jsonl`` gets one JSON line per judged example, appended and flushed (and synced) per
batch. ``run_config.json`` holds the settings that change per-example outputs; a run that finds
records made with other settings refuses to mix them. A line torn by a crash mid-write is cut off
when the directory is opened again, so the next append starts on a clean line.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from nemo_genrm.config import ConfigError, RewardBenchConfig
from nemo_genrm.files.atomic import write_atomic

logger = logging.getLogger(__name__)

EXAMPLES_FILE = "examples.jsonl"
RUN_CONFIG_FILE = "run_config.json"
_JUDGE_KEYS = {"backend", "model_name", "tokenizer", "precision", "max_model_len", "verdict_from", "sampling"}


def fingerprint(cfg: RewardBenchConfig) -> dict[str, Any]:
    """The settings that change per-example outputs (a resumed run must match them).

    Data selection, output paths, batching and resources are left out: they change which
    examples are judged or how fast, not what the judge says about one.
    """
    return json.loads(
        json.dumps(
            {
                "protocol": cfg.protocol,
                "both_orders": cfg.both_orders,
                "seed": cfg.seed,
                "placement": cfg.placement,
                "long_prompts": cfg.long_prompts,
                "judges": [m.model_dump(include=_JUDGE_KEYS) for m in cfg.judges],
                "votes": cfg.votes,
                "ties": cfg.ties,
                "judge": cfg.judge.model_dump(include=_JUDGE_KEYS),
                "prompt": cfg.prompt.model_dump(),
                "verdict": cfg.verdict.model_dump(),
            }
        )
    )


class RecordStore:
    """Per-example records of one run in ``output_dir``.

    Args:
        output_dir: The run's folder (created when missing).
        settings: The run's :func:`fingerprint`.

    Raises:
        ConfigError: The folder holds records made with other settings.
        ValueError: A complete line of ``examples.jsonl`` is not JSON (the file was edited).
    """

    def __init__(self, output_dir: str | Path, settings: Mapping[str, Any]) -> None:
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.output_dir / EXAMPLES_FILE
        meta = self.output_dir / RUN_CONFIG_FILE
        if meta.is_file() and self.path.is_file():
            previous = _read_settings(meta)
            changed = sorted(k for k in settings if previous.get(k) != settings[k])
            if changed:
                raise ConfigError(
                    [
                        (
                            f"output_dir {str(self.output_dir)!r} holds a run with different "
                            f"{', '.join(changed)}: use another output_dir, or delete it to start over"
                        )
                    ]
                )
        # Atomic: a kill while writing must not leave a run config that the resume cannot read.
        write_atomic(meta, json.dumps(dict(settings), indent=2, sort_keys=True))
        self.records = self._read()
        self._sink: IO[str] | None = None

    def _read(self) -> dict[str, dict[str, Any]]:
        """Records by id (as text); a torn last line is truncated away."""
        if not self.path.is_file():
            return {}
        raw = self.path.read_bytes()
        keep = raw.rfind(b"\n") + 1 if raw and not raw.endswith(b"\n") else len(raw)
        if keep < len(raw):
            logger.warning("%s: dropping an incomplete last line left by an interrupted write", self.path)
            with self.path.open("r+b") as f:
                f.truncate(keep)
        records = {}
        for line_no, line in enumerate(raw[:keep].decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(
                    f"{self.path}: line {line_no} is not valid JSON ({err}); delete the file to start over"
                ) from err
            records[str(record["id"])] = record
        return records

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def __getitem__(self, key: str) -> dict[str, Any]:
        return self.records[key]

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Append records and make them durable (flush and fsync) before returning."""
        if self._sink is None:
            self._sink = self.path.open("a", encoding="utf-8")
        for record in records:
            self.records[str(record["id"])] = record
            self._sink.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._sink.flush()
        os.fsync(self._sink.fileno())

    def close(self) -> None:
        """Close the file; safe to call twice."""
        if self._sink is not None:
            self._sink.close()
            self._sink = None


def _read_settings(meta: Path) -> dict[str, Any]:
    """The settings a previous run recorded; a file that cannot be read is a clear config error."""
    try:
        previous = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            [
                (
                    f"{str(meta)!r} cannot be read ({type(exc).__name__}), so the run in its folder "
                    "cannot be resumed safely: delete the folder to start over, or use another output_dir"
                )
            ]
        ) from exc
    if not isinstance(previous, dict):
        raise ConfigError([f"{str(meta)!r} does not hold a settings object: delete the folder to start over"])
    return previous
