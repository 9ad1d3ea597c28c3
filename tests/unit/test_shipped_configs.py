"""Every YAML that ships validates, and the generated configuration reference is current."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_genrm.config import RewardBenchConfig, load_config, validate
from nemo_genrm.docs import COMMAND, main, reference

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "examples" / "configs").glob("*.yaml"))


def _validate_file(path: Path) -> object:
    """Validate one shipped YAML with the loader its entry point uses (picked by file name)."""
    name = path.name
    if name.endswith("_nemo_rl.yaml"):
        # For NeMo-RL's own launcher: its `defaults:` live in a NeMo-RL checkout, and the NeMo-RL
        # suite loads the whole file with NeMo-RL's load_config (test_nemo_rl_config.py). Here:
        # the GenRM section this package reads validates on its own.
        from omegaconf import OmegaConf

        from nemo_genrm.config import GenRMConfig

        return validate(GenRMConfig, OmegaConf.to_container(OmegaConf.load(path).env.genrm), prefix="env.genrm")
    if name.startswith("grpo_"):
        from nemo_genrm.grpo.config import load_grpo_config

        return load_grpo_config(path)
    if name.startswith("reward_bench"):
        return validate(RewardBenchConfig, load_config(path, schema=RewardBenchConfig))
    if name.startswith("serve_"):
        from nemo_genrm.serve import load_service_config

        return load_service_config(path)
    raise AssertionError(f"{name}: no validator for this kind of config; add one here")


# What each shipped YAML must produce once loaded (inheritance followed) and validated: the
# section type, and values that come from the file, from a parent file (`defaults:`), from a
# schema default, or from a cross-field rule. A new YAML gets its own row.
EXPECTED: dict[str, tuple[str, dict[str, object]]] = {
    "grpo_genrm_tiny.yaml": (
        "GRPOMasterConfig",
        {
            "policy.model_name": "tiny://demo-policy",
            "policy.device": "cpu",
            "samples_per_step": 128,  # 16 prompts x 8 generations
            "grpo.max_num_steps": 64,
            "grpo.num_val_generations_per_prompt": 128,
            "policy.optimizer.kwargs.lr": 1.0e-4,
            "policy.generation.temperature": 2.4,
            "env.genrm.judge.model_name": "tiny://demo-judge",
            "env.genrm.judge.backend": "dtensor",
            "env.genrm.judge.sampling.max_new_tokens": 4,
            "env.genrm.judge.sampling.temperature": 0.0,  # schema default
            "env.genrm.resources.placement": "separate",
            "env.genrm.resources.gpus_per_replica": 0,
            "env.genrm.fault_tolerance.max_restarts": 3,  # schema default
        },
    ),
    "grpo_genrm_1B.yaml": (
        "GRPOMasterConfig",
        {
            "policy.model_name": "Qwen/Qwen2.5-1.5B-Instruct",
            "policy.optimizer.kwargs.lr": 1.0e-6,
            "grpo.num_val_generations_per_prompt": 8,
            "policy.optimizer.kwargs.betas": (0.9, 0.999),  # inherited from grpo_genrm_tiny.yaml
            "samples_per_step": 128,
            "data.dataset_name": "arithmetic",
            "env.genrm.judge.verdict_from": "logprobs",
            "env.genrm.judge.sampling.max_new_tokens": 4,  # inherited
            "env.genrm.resources.placement": "colocated",
            "env.genrm.resources.gpu_fraction": 0.3,
            "cluster.gpus_per_node": 1,
            "checkpointing.keep_last": 3,
        },
    ),
    "grpo_genrm_separate.yaml": (
        "GRPOMasterConfig",
        {
            "policy.model_name": "Qwen/Qwen2.5-1.5B-Instruct",  # inherited from grpo_genrm_1B.yaml
            "env.genrm.judge.backend": "vllm",
            "env.genrm.judge.model_name": "Qwen/Qwen2.5-7B-Instruct",
            "env.genrm.judge.verdict_from": "text",
            "env.genrm.judge.sampling.max_new_tokens": 8,
            "env.genrm.judge.vllm.gpu_memory_utilization": 0.85,
            "env.genrm.resources.placement": "separate",
            "cluster.gpus_per_node": 2,
        },
    ),
    "grpo_genrm_nemo_rl.yaml": (
        "GenRMConfig",
        {
            "judge.backend": "vllm",
            "judge.model_name": "Qwen/Qwen2.5-7B-Instruct",
            "judge.verdict_from": "logprobs",
            "judge.vllm.gpu_memory_utilization": 0.8,
            "verdict.parser": "strict",  # schema default
            "resources.gpus_per_replica": 1,
            "fault_tolerance.step_timeout_s": 600.0,
        },
    ),
    "reward_bench_genrm.yaml": (
        "RewardBenchConfig",
        {
            "judge.backend": "vllm",
            "judge.max_model_len": 8192,
            "judge.sampling.max_new_tokens": 16,  # schema default; the preset is off
            "prompt.template": "pairwise",
            "verdict.parser": "choice",
            "verdict.choice_markers": ["[[A]]", "[[B]]"],
            "protocol": "pairwise",
            "data.hf_name": "allenai/reward-bench",
            "data.split": "filtered",
            "output_dir": "results/reward_bench/genrm",
        },
    ),
    "reward_bench2_genrm.yaml": (
        "RewardBenchConfig",
        {
            "judge.model_name": "Qwen/Qwen2.5-7B-Instruct",  # inherited from reward_bench_genrm.yaml
            "protocol": "best_of_4",
            "data.hf_name": "allenai/reward-bench-2",
            "data.split": "test",
            "output_dir": "results/reward_bench2/genrm",
        },
    ),
    "reward_bench_tiny.yaml": (
        "RewardBenchConfig",
        {
            "judge.backend": "dtensor",
            "judge.precision": "float32",
            "judge.sampling.max_new_tokens": 8,
            "resources.gpus_per_replica": 0,
            "data.path": "results/reward_bench_tiny/data.jsonl",
            "data.hf_name": None,
        },
    ),
    "serve_judge_tiny.yaml": (
        "ServiceConfig",
        {
            "judge.backend": "dtensor",
            "judge.max_model_len": 1024,
            "serve.host": "127.0.0.1",
            "serve.port": 8000,
            "serve.served_model_name": "tiny-judge",
            "model_id": "tiny-judge",
            "api_key_required": False,  # loopback: no key needed
            "in_replica": True,  # dtensor with tensor parallel size 1
        },
    ),
}


def _value(cfg: object, dotted: str) -> object:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_yaml_validates(path: Path) -> None:
    assert path.name in EXPECTED, f"{path.name}: add what it must produce to EXPECTED"
    kind, values = EXPECTED[path.name]
    cfg = _validate_file(path)
    assert type(cfg).__name__ == kind
    assert {key: _value(cfg, key) for key in values} == values


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_yaml_starts_with_its_command(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    # This project's own runs start with `uv run`; a NeMo-RL run with the Python of NeMo-RL's venv.
    runner = "uv run" in first or "/.venv/bin/python " in first
    assert first.startswith("#") and runner and path.name in first, f"{path.name} must start with its command"


def test_configuration_reference_is_current() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == reference(), f"docs/configuration.md is stale: run `{COMMAND}`"


def test_the_reference_command_checks_the_committed_file(capsys) -> None:
    # `python -m nemo_genrm.docs --check` is how a script finds a stale reference: 0 when current.
    assert main(["--check"]) == 0, capsys.readouterr().out
