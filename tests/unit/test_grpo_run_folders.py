"""Each run of the driver gets folders of its own; it continues an earlier run only when asked.

A rerun of the same command used to find the previous run's step-64 checkpoint and train
nothing ("GRPO finished steps 65..64"). :func:`plan_run` now numbers runs as NeMo-RL numbers its
log folders (``exp_001``, ``exp_002``, ...) under both the log and the checkpoint root, and
``checkpointing.resume`` (``true`` or a run folder) is the only way to continue one. The entry
point's own behaviour (the same command twice, then a resume) is in
``tests/functional/test_grpo_e2e.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nemo_genrm.config import ConfigError, validate
from nemo_genrm.grpo.checkpoint import STATE_FILE, plan_run
from nemo_genrm.grpo.config import GRPOMasterConfig


def _cfg(tmp_path: Path, **checkpointing) -> GRPOMasterConfig:
    return validate(
        GRPOMasterConfig,
        {
            "grpo": {"max_num_steps": 64},
            "policy": {"model_name": "tiny://policy"},
            "env": {"genrm": {"judge": {"model_name": "tiny://judge"}, "resources": {"gpus_per_replica": 0}}},
            "cluster": {"gpus_per_node": 0},
            "logger": {"log_dir": str(tmp_path / "logs")},
            "checkpointing": {"checkpoint_dir": str(tmp_path / "ckpt"), **checkpointing},
        },
    )


def _checkpoint(folder: Path, step: int) -> Path:
    path = folder / f"step_{step}"
    path.mkdir(parents=True)
    (path / STATE_FILE).write_text(json.dumps({"step": step}))
    return path


def test_a_rerun_of_the_same_config_is_a_new_run_in_a_folder_of_its_own(tmp_path):
    cfg = _cfg(tmp_path)
    assert cfg.checkpointing.resume is False  # the default: resume only when asked
    first = plan_run(cfg)
    assert (first.name, first.log_dir, first.checkpoint_dir) == (
        "exp_001",
        tmp_path / "logs" / "exp_001",
        tmp_path / "ckpt" / "exp_001",
    )
    _checkpoint(first.checkpoint_dir, 64)  # the first run finished
    second = plan_run(cfg)
    assert second.name == "exp_002" and second.resume_from is None
    assert second.log_dir.is_dir() and second.checkpoint_dir.is_dir()  # claimed at once
    line = second.describe(64)
    assert line.startswith("Run exp_002: a new run") and str(second.checkpoint_dir) in line
    applied = second.apply(cfg)
    assert applied.checkpointing.checkpoint_dir == str(tmp_path / "ckpt" / "exp_002")
    assert applied.logger.log_dir == str(tmp_path / "logs" / "exp_002")
    assert applied.checkpointing.resume is False


def test_numbers_follow_the_highest_run_under_either_root(tmp_path):
    (tmp_path / "logs" / "exp_004").mkdir(parents=True)  # a run with checkpointing off
    (tmp_path / "ckpt" / "exp_002").mkdir(parents=True)
    (tmp_path / "ckpt" / "notes").mkdir()
    assert plan_run(_cfg(tmp_path)).name == "exp_005"
    assert plan_run(_cfg(tmp_path, enabled=False)).checkpoint_dir is None


def test_resume_true_continues_the_newest_run_that_has_a_checkpoint(tmp_path):
    _checkpoint(tmp_path / "ckpt" / "exp_001", 64)
    _checkpoint(tmp_path / "ckpt" / "exp_002", 8)
    step_16 = _checkpoint(tmp_path / "ckpt" / "exp_002", 16)
    (tmp_path / "ckpt" / "exp_003").mkdir()  # started, killed before its first save
    cfg = _cfg(tmp_path, resume=True)
    run = plan_run(cfg)
    assert (run.name, run.resume_from, run.resumed_step) == ("exp_002", step_16, 16)
    assert run.log_dir == tmp_path / "logs" / "exp_002"
    assert run.describe(64).startswith(f"Run exp_002: resuming {step_16} (step 16), training steps 17..64")
    assert run.apply(cfg).checkpointing.resume is True


def test_resume_true_at_the_last_step_says_there_is_nothing_to_train(tmp_path):
    _checkpoint(tmp_path / "ckpt" / "exp_001", 64)
    line = plan_run(_cfg(tmp_path, resume=True)).describe(64)
    assert "nothing left to train: raise grpo.max_num_steps above 64" in line


def test_resume_true_with_nothing_to_resume_starts_a_new_run_and_says_why(tmp_path):
    run = plan_run(_cfg(tmp_path, resume=True))
    assert run.name == "exp_001" and run.resume_from is None
    assert "checkpointing.resume=true found no checkpoint" in run.describe(64)


def test_resume_names_a_run_folder(tmp_path):
    older = tmp_path / "elsewhere" / "exp_007"
    step_3 = _checkpoint(older, 3)
    _checkpoint(tmp_path / "ckpt" / "exp_009", 5)
    run = plan_run(_cfg(tmp_path, resume=str(older)))
    assert (run.name, run.resume_from, run.log_dir) == ("exp_007", step_3, tmp_path / "logs" / "exp_007")
    with pytest.raises(ConfigError, match=r"checkpointing.resume: .*step_3 holds no complete checkpoint.*run folder"):
        plan_run(_cfg(tmp_path, resume=str(step_3)))  # a step folder is not a run folder


def test_resume_without_checkpointing_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="checkpointing.resume is True but checkpointing.enabled is false"):
        _cfg(tmp_path, resume=True, enabled=False)
