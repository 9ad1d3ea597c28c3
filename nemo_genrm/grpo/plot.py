"""The plot every run draws: training reward, held-out reward and exact match per step, and the
reward watchdog's canary false accepts and alarms when there are any.

:func:`plot_metrics` reads a run's ``metrics.jsonl`` (written by
:class:`~nemo_genrm.grpo.logger.MetricsLogger`) and draws the judge's training and validation
reward next to the exact match the driver checks apart from the judge. It is the driver's own,
drawn after every run, so any run (not only the demo's) gets it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from nemo_genrm.files.atomic import read_jsonl

__all__ = ["PLOT_NAME", "plot_metrics"]

PLOT_NAME = "reward_and_accuracy.png"


def _series(records: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], r[key]) for r in records if key in r and not math.isnan(r[key])]
    return [p[0] for p in points], [p[1] for p in points]


def plot_metrics(log_dir: str | Path) -> Path | None:
    """Draw reward and exact match per step from ``<log_dir>/metrics.jsonl`` into a PNG.

    Args:
        log_dir: The run's log folder.

    Returns:
        The PNG's path (:data:`PLOT_NAME` in ``log_dir``), or ``None`` when nothing was logged.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a training machine
    import matplotlib.pyplot as plt

    metrics = Path(log_dir) / "metrics.jsonl"
    if not metrics.is_file():
        return None
    records = read_jsonl(metrics).records  # a torn last line (a killed run) is skipped, not fatal
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label, style in (
        ("train/reward_mean", "train reward (judge)", "-"),
        ("val/reward_mean", "held-out reward (judge)", "o--"),
        ("val/exact_match", "held-out exact match (checker)", "s-"),
    ):
        steps, values = _series(records, key)
        if steps:
            ax.plot(steps, values, style, label=label)
    steps, values = _series(records, "genrm/canary/false_accept_rate")
    if steps and any(values):
        ax.plot(steps, values, ":", label="canary false accepts (watchdog)")
    alarms = [r["step"] for r in records if r.get("genrm/watchdog/alarms", 0) > 0]
    for i, step in enumerate(alarms):
        ax.axvline(step, color="red", alpha=0.4, label="watchdog alarm" if i == 0 else None)
    ax.set_xlabel("GRPO step")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("GRPO with a GenRM reward")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    out = Path(log_dir) / PLOT_NAME
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
