"""The plot every GRPO run draws from its metrics.jsonl (nemo_genrm.grpo.plot)."""

from __future__ import annotations

import json

from nemo_genrm.grpo.plot import PLOT_NAME, plot_metrics


def test_plot_reads_metrics_past_a_torn_line_and_nan_values(tmp_path):
    records = [
        {"step": 0, "val/reward_mean": 0.4, "val/exact_match": 0.3},
        {"step": 1, "train/reward_mean": 0.5},
        {"step": 2, "train/reward_mean": float("nan"), "val/reward_mean": 0.6, "val/exact_match": 0.5},
    ]
    text = "\n".join(json.dumps(r) for r in records) + '\n{"step": 3, "train/rew'  # a killed run's last line
    (tmp_path / "metrics.jsonl").write_text(text)
    png = plot_metrics(tmp_path)
    assert png == tmp_path / PLOT_NAME
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_metrics_no_plot(tmp_path):
    assert plot_metrics(tmp_path) is None
    assert not (tmp_path / PLOT_NAME).exists()
