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
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
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

    from nemo_genrm.grpo.nemo_rl_engine import TASK_NAME, datasets_for, prepare_nemo_rl_inputs
    from nemo_genrm.integrations.nemo_rl import ACTOR_FQN, register

    nemo_rl_root = Path(importlib.util.find_spec("nemo_rl").origin).parents[1]
    base = nemo_rl_root / "examples" / "configs" / "grpo_math_1B.yaml"
    if not base.is_file():
        pytest.skip(f"NeMo-RL's example configs are not next to the package ({base})")
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"defaults: {base}\n"
        "policy:\n  model_name: tiny://policy\n  tokenizer:\n    name: tiny://policy\n"
        "data:\n  train: null\n  dataset_name: arithmetic\n  num_builtin_examples: 16\n"
        "env:\n  genrm:\n    judge:\n      model_name: tiny://judge\n      precision: float32\n"
        "    resources:\n      gpus_per_replica: 0\n"
    )
    inputs = prepare_nemo_rl_inputs(cfg, ["+data.val_fraction=0.25"])
    assert not inputs.nemo_rl_data
    assert inputs.config["env"]["genrm"]["judge"]["model_name"].startswith(tiny_cache_dir)
    assert len(inputs.train) == 12 and len(inputs.val) == 4
    register(TASK_NAME)
    assert env_utils.ENV_REGISTRY[TASK_NAME]["actor_class_fqn"] == ACTOR_FQN
    inputs.config["policy"]["tokenizer"]["name"] = inputs.config["policy"]["model_name"]
    tokenizer = get_tokenizer(inputs.config["policy"]["tokenizer"])
    train, val = datasets_for(inputs, tokenizer)
    datum = train[0]
    assert datum["task_name"] == TASK_NAME
    assert set(datum["extra_env_info"]) == {"question", "ground_truth"}
    assert datum["message_log"][0]["content"].endswith("assistant\n")  # chat-templated user turn
    assert len(val) == 4


TINY_JUDGE = "    judge:\n      model_name: tiny://judge\n      precision: float32\n"


def _nemo_rl_yaml(tmp_path: Path, judge: str = TINY_JUDGE) -> Path:
    """A NeMo-RL-style GenRM config on top of NeMo-RL's own grpo_math_1B.yaml, tiny models."""
    nemo_rl_root = Path(importlib.util.find_spec("nemo_rl").origin).parents[1]
    base = nemo_rl_root / "examples" / "configs" / "grpo_math_1B.yaml"
    if not base.is_file():
        pytest.skip(f"NeMo-RL's example configs are not next to the package ({base})")
    cfg = tmp_path / "grpo.yaml"
    cfg.write_text(
        f"defaults: {base}\n"
        "policy:\n  model_name: tiny://policy\n"  # tokenizer.name interpolates it
        "data:\n  train: null\n  dataset_name: arithmetic\n  num_builtin_examples: 16\n"
        f"logger:\n  log_dir: {tmp_path / 'logs'}\n"
        f"checkpointing:\n  checkpoint_dir: {tmp_path / 'ckpt'}\n"
        f"env:\n  genrm:\n{judge}"
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
    from nemo_genrm.testing.stand_in_judges import dead_base_url

    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "1")  # NeMo-RL's own retry count
    caplog.set_level(logging.INFO, logger="nemo_genrm.grpo.nemo_rl_engine")
    overrides = ["grpo.max_num_steps=1", f"cluster.gpus_per_node={RAY_TEST_GPUS + 1}"]
    # A judge over HTTP starts at once (nothing to load); the command test below loads a model.
    http_judge = (
        f"    judge:\n      backend: http\n      model_name: m\n      http:\n        base_url: {dead_base_url()}\n"
    )
    with pytest.raises(ResourceInsufficientError, match="Maximum number of retries") as info:
        run_with_nemo_rl(_nemo_rl_yaml(tmp_path, http_judge), overrides)
    assert "--engine nemo_rl stopped in step 'setup'" in info.value.__notes__
    stages = [
        r.getMessage().split(": ", 1)[1] for r in caplog.records if r.getMessage().startswith("--engine nemo_rl: ")
    ]
    assert stages == ["config", "ray", "tokenizer", "data", "environment", "setup"]
    assert "Not enough GPUs available" in capsys.readouterr().out  # NeMo-RL prints each failed try


SHIPPED = ROOT / "examples" / "configs" / "grpo_genrm_nemo_rl.yaml"


@pytest.mark.nemo_rl
def test_shipped_yaml_both_data_sections_are_refused_naming_the_fix():
    from nemo_genrm.grpo.nemo_rl_engine import prepare_nemo_rl_inputs

    # grpo_math_1B.yaml (read from the installed NeMo-RL) names OpenMathInstruct-2 in data.train.
    with pytest.raises(ConfigError, match=r"data.train \(OpenMathInstruct-2.*data.dataset_name.*data.train=null"):
        prepare_nemo_rl_inputs(SHIPPED, ["+data.dataset_name=arithmetic"])
    with pytest.raises(ConfigError, match=r"'colocated': NeMo-RL's GRPO creates its environments.*placement: separate"):
        prepare_nemo_rl_inputs(
            SHIPPED, ["env.genrm.resources.placement=colocated", "env.genrm.resources.gpu_fraction=0.8"]
        )


@pytest.mark.nemo_rl
def test_the_documented_command_from_this_checkout_trains_on_the_yamls_data_up_to_the_gpu_request(
    tmp_path, ray_cluster, tiny_cache_dir, monkeypatch, caplog, capsys
):
    """``examples/run_grpo_genrm.py --engine nemo_rl --config examples/configs/grpo_genrm_nemo_rl.yaml``
    run from this checkout: its ``defaults: grpo_math_1B.yaml`` and that file's prompt file come
    from the installed NeMo-RL, the YAML's data section (NeMo-RL's ``data.train``, here a local
    file in place of the hub's OpenMathInstruct-2) is what NeMo-RL loads, NeMo-RL's create_env
    starts the environment and the engine waits for its judge, and the run stops where NeMo-RL's
    policy cluster asks Ray for 7 GPUs (the session cluster has 4)."""
    import logging
    import runpy

    from nemo_rl.distributed.virtual_cluster import ResourceInsufficientError

    from nemo_genrm.testing.stand_in_judges import dead_base_url

    rows = tmp_path / "questions.jsonl"
    rows.write_text("".join(f'{{"question": "What is {i} plus 1?", "answer": "{i + 1}"}}\n' for i in range(10)))
    overrides = [
        "policy.model_name=tiny://policy",
        f"logger.log_dir={tmp_path / 'logs'}",
        f"checkpointing.checkpoint_dir={tmp_path / 'ckpt'}",
        "data.train.dataset_name=ResponseDataset",
        f"+data.train.data_path={rows}",
        "+data.train.input_key=question",
        "+data.train.output_key=answer",
        "data.train.split_validation_size=0.2",
        # A judge over HTTP (nothing to load; the run stops before its first step).
        "env.genrm.judge.backend=http",
        "env.genrm.judge.model_name=m",
        f"env.genrm.judge.http.base_url={dead_base_url()}",
        "env.genrm.resources.gpus_per_replica=0",
    ]
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NRL_VIRTUAL_CLUSTER_MAX_RETRIES", "1")  # NeMo-RL's own retry count
    command = ["--engine", "nemo_rl", "--config", str(SHIPPED.relative_to(ROOT)), *overrides]
    monkeypatch.setattr(sys, "argv", ["run_grpo_genrm.py", *command])
    caplog.set_level(logging.INFO, logger="nemo_genrm.grpo")
    with pytest.raises(ResourceInsufficientError, match="Maximum number of retries") as info:
        runpy.run_path("examples/run_grpo_genrm.py", run_name="__main__")
    assert "--engine nemo_rl stopped in step 'setup'" in info.value.__notes__
    messages = [r.getMessage() for r in caplog.records]
    prefix = "--engine nemo_rl: "
    stages = [m[len(prefix) :] for m in messages if m.startswith(prefix) and m[len(prefix) :].isidentifier()]
    assert stages == ["config", "ray", "tokenizer", "data", "environment", "setup"]
    assert "--engine nemo_rl: training data from NeMo-RL's data.train (ResponseDataset)" in messages
    assert any("prompt_file 'examples/prompts/cot.txt' read from the NeMo-RL checkout" in m for m in messages)
    out = capsys.readouterr().out
    assert "Training dataset loaded with 8 samples" in out  # the YAML's data, not the built-in set
    assert "Validation dataset loaded with 2 samples" in out  # its split_validation_size: 0.2
    assert "Not enough GPUs available" in out
