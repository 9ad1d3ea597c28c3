"""The results files of a RewardBench run, in reward-bench's shape and the project's.

- ``results.json``: exactly what reward-bench's ``run_generative.py`` saves for the core set
  (``model`` with its organisation prefix, ``model_type``, ``chat_template`` and one key per
  subset), so its own tools read it: ``analysis/utils.load_results`` averages every column but
  the model's, so nothing else may sit at the top level. Dumped as reward-bench dumps it
  (``indent=4``, sorted keys). To load it with those tools, place it as
  ``<dir>/eval-set/<org>/<name>.json``, where reward-bench saves its own.
- ``results_pref_sets.json``: the same for the prior preference sets (``data.pref_sets``), which
  reward-bench saves apart (``pref-sets/``).
- ``summary.json``: what reward-bench only prints or the leaderboard computes (section scores,
  ``Prior Sets (0.5 weight)``, ``Score``) and the project's extras (counters per subset, examples
  too long for the judge, settings, the preset's provenance) under ``nemo_genrm``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nemo_genrm.config import RewardBenchConfig
from nemo_genrm.files.atomic import write_atomic

RESULTS_FILE = "results.json"
PREF_RESULTS_FILE = "results_pref_sets.json"
SUMMARY_FILE = "summary.json"
MODEL_TYPE = "Generative RM"
ENSEMBLE_SUFFIX = " PoLL"  # reward-bench's model_type suffix and name prefix for a judge ensemble
LOCAL_ORG = "local"
_ORG_AND_NAME = re.compile(r"^[\w.-]+/[\w.-]+$")


def model_label(cfg: RewardBenchConfig) -> str:
    """The results' model name: ``<org>/<name>``, as reward-bench files results.

    ``model_label`` when set; for an ensemble (``judges``) ``PoLL/<names joined by _>`` as the
    reference names one; else ``judge.model_name`` when it reads ``org/name`` and is not a local
    folder; else ``local/<last path part>``.
    """
    if cfg.model_label:
        return cfg.model_label
    if cfg.judges:
        return "PoLL/" + "_".join(Path(m.model_name.rstrip("/")).name for m in cfg.judges)
    name = cfg.judge.model_name
    if _ORG_AND_NAME.match(name) and not Path(name).exists():
        return name
    return f"{LOCAL_ORG}/{Path(name.rstrip('/')).name or name}"


def model_type(cfg: RewardBenchConfig) -> str:
    """``Generative RM``, or ``Generative RM PoLL`` for an ensemble of judges (as the reference)."""
    return MODEL_TYPE + (ENSEMBLE_SUFFIX if cfg.judges else "")


def results_row(model: str, accuracy: Mapping[str, float], model_type: str = MODEL_TYPE) -> dict[str, Any]:
    """One results file in reward-bench's shape: the model and its per-subset accuracies only."""
    return {"model": model, "model_type": model_type, "chat_template": None, **accuracy}


def write_json(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as reward-bench writes its results (``indent=4``, sorted keys)."""
    write_atomic(path, json.dumps(dict(data), indent=4, sort_keys=True))
    return path
