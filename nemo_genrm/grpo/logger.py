"""Metrics to stdout, a JSONL file, TensorBoard and wandb, with one ``log`` call per step.

Every record lands in ``<log_dir>/metrics.jsonl`` (one JSON object per step, ``step`` included),
which is what tests and scripts read. The file is append-only: each step adds one whole line
(flushed to disk), and a resume reads it tolerating a torn last line. It is rewritten only when
a resume must drop records past its checkpoint or a torn line, and then atomically (temporary
file and rename), so a kill at any moment loses at most the step being written.
``<log_dir>/config.json`` is written atomically too, and, like the config given to wandb, with
credentials in URLs masked. TensorBoard event files go to ``<log_dir>/tensorboard`` and
wandb files to ``<log_dir>/wandb`` (offline mode needs no network).
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from nemo_genrm.files.atomic import read_jsonl, write_atomic, write_json_atomic
from nemo_genrm.grpo.config import LoggerConfig
from nemo_genrm.guard.redact import redact_tree

logger = logging.getLogger(__name__)

__all__ = ["MetricsLogger"]

# Shown on the per-step stdout line, in this order, when present: (metric, label).
_HEADLINE = (
    ("train/reward_mean", "reward"),
    ("val/reward_mean", "val_reward"),
    ("train/loss", "loss"),
    ("train/kl", "kl"),
    ("train/grad_norm", "grad_norm"),
    ("genrm/parse_failure_rate", "parse_fail"),
    ("timeline/generation_s", "gen_s"),
    ("timeline/judge_s", "judge_s"),
    ("timeline/train_s", "train_s"),
)


class MetricsLogger:
    """Writes each step's metrics to every enabled sink.

    Args:
        cfg: The ``logger`` section.
        run_config: The whole config, recorded by wandb and in ``<log_dir>/config.json``.
    """

    def __init__(self, cfg: LoggerConfig, run_config: dict[str, Any] | None = None):
        self.cfg = cfg
        self.log_dir = Path(cfg.log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.log_dir / "metrics.jsonl"
        if run_config is not None:  # a judge's base_url may carry user:key@
            run_config = redact_tree(run_config)
            write_json_atomic(self.log_dir / "config.json", run_config)
        self._tb = None
        self._wandb = None
        if cfg.tensorboard_enabled:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.log_dir / "tensorboard"))
        if cfg.wandb_enabled:
            self._wandb = self._start_wandb(run_config)

    def _start_wandb(self, run_config: dict[str, Any] | None) -> Any:
        import wandb

        return wandb.init(
            project=self.cfg.wandb.project,
            name=self.cfg.wandb.name,
            dir=str(self.log_dir),
            config=run_config,
            mode=self.cfg.wandb.mode,
            reinit="finish_previous",
        )

    def begin(self, resumed_step: int) -> None:
        """Prepare ``metrics.jsonl`` for a run starting after ``resumed_step``.

        A fresh run (0) starts an empty file; a resumed run keeps the records up to its
        checkpoint and drops later ones (those steps are run again) and any torn line a kill
        left. When nothing needs dropping the file is left as it is and appended to.
        """
        if not self.metrics_path.exists():
            return
        if resumed_step <= 0:
            write_atomic(self.metrics_path, "")
            return
        found = read_jsonl(self.metrics_path)
        kept = [
            line for line, record in zip(found.lines, found.records, strict=True) if _step_of(record) <= resumed_step
        ]
        if found.clean and len(kept) == len(found.lines):
            return
        logger.info(
            "metrics.jsonl: keeping %d records up to step %d (%d later or unreadable dropped)",
            len(kept),
            resumed_step,
            len(found.lines) - len(kept) + found.dropped,
        )
        write_atomic(self.metrics_path, "".join(f"{line}\n" for line in kept))

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Record one step's metrics everywhere.

        Args:
            metrics: Flat name -> number (names with ``/`` group in TensorBoard and wandb).
            step: The training step.
        """
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        line = json.dumps({"step": step, **{k: _jsonable(v) for k, v in clean.items()}}) + "\n"
        with self.metrics_path.open("a", encoding="utf-8") as f:
            f.write(line)  # one write of a whole line: a kill leaves at most a torn tail
            f.flush()
            os.fsync(f.fileno())
        if self._tb is not None:
            for key, value in clean.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(clean, step=step)
        shown = " ".join(f"{label}={clean[key]:.4g}" for key, label in _HEADLINE if key in clean)
        logger.info("step %d: %s", step, shown)

    def close(self) -> None:
        """Flush and close every sink; safe to call twice."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def _step_of(record: dict[str, Any]) -> float:
    """A record's step; one without a readable step sorts after every checkpoint (dropped)."""
    step = record.get("step")
    return step if isinstance(step, (int, float)) and not isinstance(step, bool) else math.inf


def _jsonable(value: float) -> float | None:
    """NaN and infinities become null (JSON has no spelling for them)."""
    return value if math.isfinite(value) else None
