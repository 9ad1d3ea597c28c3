"""The GenRM environment inside NeMo-RL's real code: registry, ``create_env``, rewards, rollouts,
metrics through NeMo-RL's logger, and the data processor. Needs NeMo-RL (CI's NeMo-RL env)."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from nemo_rl_support import GENRM_TASK, MATH_TASK, QUESTION, genrm_cfg, nemo_rl_batch, rows

pytestmark = pytest.mark.nemo_rl


@pytest.fixture(scope="module")
def tokenizer(tiny_cache_dir):
    from nemo_rl.algorithms.utils import get_tokenizer

    from nemo_genrm.testing import cached_tiny_tokenizer

    return get_tokenizer({"name": str(cached_tiny_tokenizer(cache_dir=tiny_cache_dir))})


@pytest.fixture(scope="module")
def envs(ray_cluster, tiny_cache_dir):
    """``register`` then NeMo-RL's ``create_env`` for the GenRM env and NeMo-RL's math env."""
    from nemo_rl.environments.utils import create_env

    from nemo_genrm.integrations.nemo_rl import register
    from nemo_genrm.testing import cached_tiny_judge

    register()
    judge = str(cached_tiny_judge("1", cache_dir=tiny_cache_dir))
    task_to_env = {GENRM_TASK: create_env("genrm", genrm_cfg(judge)), MATH_TASK: create_env("math", {"num_workers": 1})}
    yield task_to_env
    from nemo_rl.algorithms.grpo import shutdown_environments

    shutdown_environments(task_to_env, None)


def _respond(answer_for: dict[str, str]):
    def respond(prompt: str) -> str:
        for marker, answer in answer_for.items():
            if marker in prompt:
                return f"The result is \\boxed{{{answer}}}"
        return ""

    return respond


def test_processor_puts_the_raw_question_into_extra_env_info(tokenizer):
    from nemo_genrm.integrations.nemo_rl import register

    register()
    batch = nemo_rl_batch(tokenizer, rows(2, GENRM_TASK) + rows(1, MATH_TASK))
    assert batch["task_name"] == [GENRM_TASK, GENRM_TASK, MATH_TASK]
    assert batch["extra_env_info"][0] == {"ground_truth": "42", "question": f"{QUESTION} (#0)"}
    assert batch["extra_env_info"][2] == {"ground_truth": "42"}  # NeMo-RL's own processor
    assert batch["message_log"][0][0]["content"].startswith("<|im_start|>user\n")  # templated prompt


def test_calculate_rewards_mixes_genrm_and_nemo_rl_math(envs, tokenizer):
    import ray
    from nemo_rl.experience.rollouts import calculate_rewards

    batch = nemo_rl_batch(tokenizer, rows(2, GENRM_TASK) + rows(2, MATH_TASK))
    responses = ["\\boxed{42}", "\\boxed{41}", "\\boxed{42}", "\\boxed{41}"]
    for log, text in zip(batch["message_log"], responses, strict=True):
        log.append({"role": "assistant", "content": text, "token_ids": tokenizer(text)["input_ids"]})
    result = calculate_rewards(batch, envs)
    # The tiny judge always says "agrees" (1); NeMo-RL's math verifier checks the value.
    assert result.rewards.tolist() == [1.0, 1.0, 1.0, 0.0]
    assert [m["genrm"]["reason"] for m in result.metadata[:2]] == ["judged", "judged"]
    assert "genrm" not in result.metadata[2]
    _, metrics = ray.get(envs[GENRM_TASK].global_post_process_and_metrics.remote(None))
    assert metrics["genrm/num_samples"] == 2 and metrics["genrm/count/judged"] == 2


@pytest.mark.parametrize("rollout", ["run_multi_turn_rollout", "run_async_multi_turn_rollout"])
def test_rollouts_with_a_scripted_policy_log_the_whole_step(envs, tokenizer, rollout):
    """Both rollout paths reward every sample; the step's metrics reach NeMo-RL's logger."""
    from nemo_rl.experience import rollouts

    from nemo_genrm.integrations.nemo_rl_metrics import log_genrm_metrics
    from nemo_genrm.testing.scripted_generation import ScriptedGeneration

    batch = nemo_rl_batch(tokenizer, rows(6, GENRM_TASK) + rows(2, MATH_TASK))
    generation = ScriptedGeneration(tokenizer, _respond({"(#0)": "42", "(#1)": "7"}), delay_s=0.01)
    log_genrm_metrics(MagicMock(), envs, 0)  # start a fresh window
    final, metrics = getattr(rollouts, rollout)(generation, batch, tokenizer, envs, max_seq_len=512, max_rollout_turns=1)
    rewards = final["total_reward"].tolist()
    # GenRM: an empty response has no answer -> 0; the judge agrees with the rest. Math: #0 right, #1 wrong.
    assert rewards == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert (generation.async_calls > 0) == (rollout == "run_async_multi_turn_rollout")
    nemo_logger = MagicMock()
    logged = log_genrm_metrics(nemo_logger, envs, 3)
    assert logged["genrm/num_samples"] == 6  # every GenRM sample of the rollout, on both paths
    assert logged["genrm/count/no_answer"] == 4 and logged["genrm/count/judged"] == 2
    nemo_logger.log_metrics.assert_called_once_with(logged, 3, prefix="train")


def test_metrics_logger_adds_genrm_to_train_logs_only(envs):
    from nemo_genrm.integrations.nemo_rl_metrics import GenRMMetricsLogger, genrm_envs

    assert genrm_envs(envs) == [envs[GENRM_TASK]]  # the math env is left alone
    inner = MagicMock()
    wrapped = GenRMMetricsLogger(inner, envs, envs)
    wrapped.log_metrics({"loss": 1.0}, 5, prefix="timing/train")
    wrapped.log_metrics({"loss": 1.0}, 5, prefix="train")
    first, second = inner.log_metrics.call_args_list
    assert first.args == ({"loss": 1.0}, 5, "timing/train")
    assert second.args[2] == "train" and "genrm/num_samples" in second.args[0]
    wrapped.log_hyperparams({"a": 1})
    inner.log_hyperparams.assert_called_once_with({"a": 1})


def _doc_blocks(language: str) -> list[str]:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "nemo_rl.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def _scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found: dict[str, list[tuple[int, float]]] = {}
    for events in log_dir.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events.parent))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            found.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return found


def test_docs_nemo_rl_page_followed_literally(envs, tokenizer, tmp_path):
    """Every Python block of docs/nemo_rl.md runs as written, in order, with NeMo-RL's real
    Logger (TensorBoard backend) and the environments NeMo-RL's create_env started; the
    ``train/genrm/*`` scalars land in NeMo-RL's TensorBoard files."""
    import ray
    from nemo_rl.experience.rollouts import run_multi_turn_rollout
    from nemo_rl.utils.logger import Logger

    from nemo_genrm.testing.scripted_generation import ScriptedGeneration

    python_blocks = _doc_blocks("python")
    assert len(python_blocks) == 3, "docs/nemo_rl.md's code blocks changed: update this test"
    nemo_logger = Logger({
        "log_dir": str(tmp_path), "wandb_enabled": False, "swanlab_enabled": False,
        "tensorboard_enabled": True, "mlflow_enabled": False, "wandb": {}, "tensorboard": {},
        "monitor_gpus": False, "gpu_monitoring": {"collection_interval": 10, "flush_interval": 10},
    })
    scope = {"task_to_env": envs, "val_task_to_env": envs, "logger": nemo_logger, "step": 1}
    exec(python_blocks[0], scope)  # register()
    batch = nemo_rl_batch(tokenizer, rows(4, GENRM_TASK))
    generation = ScriptedGeneration(tokenizer, lambda _prompt: "\\boxed{42}")
    ray.get(envs[GENRM_TASK].global_post_process_and_metrics.remote(None))  # earlier tests' steps
    run_multi_turn_rollout(generation, batch, tokenizer, envs, max_seq_len=512, max_rollout_turns=1)
    exec(python_blocks[1], scope)  # logger = GenRMMetricsLogger(logger, ...)
    scope["logger"].log_metrics({"loss": 0.5}, 1, prefix="train")  # what grpo_train does each step
    run_multi_turn_rollout(generation, batch, tokenizer, envs, max_seq_len=512, max_rollout_turns=1)
    exec(python_blocks[2], {**scope, "logger": nemo_logger, "step": 2})  # log_genrm_metrics(...)
    for backend in nemo_logger.loggers:
        backend.writer.flush()
    scalars = _scalars(tmp_path)
    assert scalars["train/loss"] == [(1, 0.5)]
    assert scalars["train/genrm/num_samples"] == [(1, 4.0), (2, 4.0)]  # each step's own samples
    assert scalars["train/genrm/mean_reward"] == [(1, 1.0), (2, 1.0)]
