"""``--engine nemo_rl``: a clear error without NeMo-RL; with it, datasets and registration in NeMo-RL's shapes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_genrm.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
HAVE_NEMO_RL = importlib.util.find_spec("nemo_rl") is not None


@pytest.mark.skipif(HAVE_NEMO_RL, reason="NeMo-RL is installed: the error path cannot be reached")
def test_without_nemo_rl_the_script_says_what_to_do(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "run_grpo_genrm.py"), "--engine", "nemo_rl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "--engine nemo_rl needs NeMo-RL" in proc.stderr
    assert "Traceback" not in proc.stderr  # a message, not a crash


@pytest.mark.skipif(HAVE_NEMO_RL, reason="NeMo-RL is installed")
def test_without_nemo_rl_the_engine_raises_a_config_error():
    from nemo_genrm.grpo.nemo_rl_engine import run_with_nemo_rl

    with pytest.raises(ConfigError, match="not importable"):
        run_with_nemo_rl(ROOT / "examples" / "configs" / "grpo_genrm_tiny.yaml", [])


def test_a_config_that_is_not_nemo_rl_complete_is_explained():
    from nemo_genrm.grpo.nemo_rl_engine import prepare_nemo_rl_inputs

    with pytest.raises(ConfigError, match=r"complete NeMo-RL GRPO config.*policy.dtensor_cfg.*defaults:"):
        prepare_nemo_rl_inputs(ROOT / "examples" / "configs" / "grpo_genrm_tiny.yaml", [])


@pytest.mark.nemo_rl
def test_nemo_rl_inputs_datasets_and_registration(tmp_path, tiny_cache_dir):
    from nemo_rl.algorithms.utils import get_tokenizer
    from nemo_rl.environments import utils as env_utils

    from nemo_genrm.grpo.nemo_rl_engine import TASK_NAME, _datasets, prepare_nemo_rl_inputs
    from nemo_genrm.integrations.nemo_rl import ACTOR_FQN, register

    nemo_rl_root = Path(importlib.util.find_spec("nemo_rl").origin).parents[1]
    base = nemo_rl_root / "examples" / "configs" / "grpo_math_1B.yaml"
    if not base.is_file():
        pytest.skip(f"NeMo-RL's example configs are not next to the package ({base})")
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"defaults: {base}\n"
        "policy:\n  model_name: tiny://policy\n  tokenizer:\n    name: tiny://policy\n"
        "data:\n  dataset_name: arithmetic\n  num_builtin_examples: 16\n"
        "env:\n  genrm:\n    judge:\n      model_name: tiny://judge\n      precision: float32\n"
        "    resources:\n      gpus_per_replica: 0\n"
    )
    inputs = prepare_nemo_rl_inputs(cfg, ["+data.val_fraction=0.25"])
    assert inputs.config["env"]["genrm"]["judge"]["model_name"].startswith(tiny_cache_dir)
    assert len(inputs.train) == 12 and len(inputs.val) == 4
    register(TASK_NAME)
    assert env_utils.ENV_REGISTRY[TASK_NAME]["actor_class_fqn"] == ACTOR_FQN
    inputs.config["policy"]["tokenizer"]["name"] = inputs.config["policy"]["model_name"]
    tokenizer = get_tokenizer(inputs.config["policy"]["tokenizer"])
    train, val = _datasets(inputs, tokenizer)
    datum = train[0]
    assert datum["task_name"] == TASK_NAME
    assert set(datum["extra_env_info"]) == {"question", "ground_truth"}
    assert datum["message_log"][0]["content"].endswith("assistant\n")  # chat-templated user turn
    assert len(val) == 4


def _nemo_rl_yaml(tmp_path: Path) -> Path:
    """A NeMo-RL-style GenRM config on top of NeMo-RL's own grpo_math_1B.yaml, tiny models."""
    nemo_rl_root = Path(importlib.util.find_spec("nemo_rl").origin).parents[1]
    base = nemo_rl_root / "examples" / "configs" / "grpo_math_1B.yaml"
    if not base.is_file():
        pytest.skip(f"NeMo-RL's example configs are not next to the package ({base})")
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"defaults: {base}\n"
        "policy:\n  model_name: tiny://policy\n"  # tokenizer.name interpolates it
        "data:\n  dataset_name: arithmetic\n  num_builtin_examples: 16\n"
        f"logger:\n  log_dir: {tmp_path / 'logs'}\n"
        f"checkpointing:\n  checkpoint_dir: {tmp_path / 'ckpt'}\n"
        "env:\n  genrm:\n    judge:\n      model_name: tiny://judge\n      precision: float32\n"
        "    resources:\n      gpus_per_replica: 0\n"
    )
    return cfg


@pytest.mark.nemo_rl
def test_nemo_rl_engine_resolves_interpolated_tiny_names_and_resolvers(tmp_path, tiny_cache_dir):
    from nemo_genrm.grpo.nemo_rl_engine import prepare_nemo_rl_inputs

    inputs = prepare_nemo_rl_inputs(_nemo_rl_yaml(tmp_path), [])  # grpo_math_1B uses ${mul:...}
    policy = inputs.config["policy"]
    assert policy["model_name"].startswith(tiny_cache_dir)
    assert policy["tokenizer"]["name"] == policy["model_name"]  # interpolated, then resolved
    assert not any("tiny://" in str(v) for v in inputs.config.values())


@pytest.mark.nemo_rl
def test_nemo_rl_engine_runs_run_grpo_steps_until_the_gpu_cluster(tmp_path, ray_cluster, monkeypatch, caplog, capsys):
    """Without real GPUs the engine gets through config, Ray, tokenizer and data, and stops in
    NeMo-RL's setup, where its training cluster asks Ray for GPUs. The session's Ray cluster
    declares a few virtual GPUs for placement tests; the policy asks for one more than that, as a
    CPU machine's policy asks for more than its none (going further would start NeMo-RL's GPU
    workers)."""
    import logging

    from conftest import RAY_TEST_GPUS
    from nemo_rl.distributed.virtual_cluster import ResourceInsufficientError

    from nemo_genrm.grpo.nemo_rl_engine import run_with_nemo_rl

    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "1")  # NeMo-RL's own retry count
    caplog.set_level(logging.INFO, logger="nemo_genrm.grpo.nemo_rl_engine")
    overrides = ["grpo.max_num_steps=1", f"cluster.gpus_per_node={RAY_TEST_GPUS + 1}"]
    with pytest.raises(ResourceInsufficientError, match="Maximum number of retries") as info:
        run_with_nemo_rl(_nemo_rl_yaml(tmp_path), overrides)
    assert "--engine nemo_rl stopped in step 'setup'" in info.value.__notes__
    stages = [r.getMessage().split(": ", 1)[1] for r in caplog.records if r.getMessage().startswith("--engine nemo_rl: ")]
    assert stages == ["config", "ray", "tokenizer", "data", "setup"]
    assert "Not enough GPUs available" in capsys.readouterr().out  # NeMo-RL prints each failed try
