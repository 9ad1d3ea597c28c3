"""A judge whose context cannot hold the prompt: refused at start-up, and said once at run time.

The fixed parts below are counted with the tiny tokenizer on prompts rendered with
``prompt.fence_seed: 0`` (the fence nonce is then the keyed hash of the empty fields, so the
count is the same on every run): 573 tokens for the ``consistency`` template, 121 for
``consistency_compact`` (measured once with :func:`nemo_genrm.judges.fitting.prompt_tokens`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from nemo_genrm.config import ConfigError, GenRMConfig, JudgeConfig, validate
from nemo_genrm.env import environment as environment_module
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.base import Generation, JudgeStats
from nemo_genrm.judges.fitting import FittedPrompt, PromptFitter, prompt_tokens
from nemo_genrm.judges.pipeline import LocalRunner, PipelineJudge
from nemo_genrm.modes import build_mode
from nemo_genrm.prompts import PromptBuilder
from nemo_genrm.testing import cached_tiny_judge, cached_tiny_tokenizer
from nemo_genrm.testing.stand_in_judges import shown_responses

CONSISTENCY_FIXED = 573
COMPACT_FIXED = 121
NEW_TOKENS = 16  # sampling.max_new_tokens's default


class _AgreeWorker:
    """Token-level protocol without a model: replies "1" to every prompt that reaches it."""

    def __init__(self) -> None:
        self.prompts = 0
        self.shown: list[str] = []  # the answer each prompt showed the judge

    def generate_fitted(self, prompts: Sequence[FittedPrompt]) -> list[tuple[str, int]]:
        self.prompts += len(prompts)
        self.shown += [shown_responses(p.messages[-1]["content"])[0] for p in prompts if p.messages]
        return [("1", 1) for _ in prompts]

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def _cfg(model: str, *, max_model_len: int, template: str = "consistency", **prompt: Any) -> dict[str, Any]:
    return {
        "judge": {"model_name": model, "max_model_len": max_model_len},
        "prompt": {"template": template, "fence_seed": 0, **prompt},
        "resources": {"gpus_per_replica": 0},
    }


def _judge(cfg: dict[str, Any]) -> PipelineJudge:
    config = JudgeConfig.model_validate(cfg["judge"])
    return PipelineJudge(config, LocalRunner(_AgreeWorker()), fitter=PromptFitter.for_judge(config))


@pytest.fixture(scope="module")
def tokenizer_path(tiny_cache_dir: str) -> str:
    return str(cached_tiny_tokenizer(cache_dir=tiny_cache_dir))


def test_fixed_parts_are_counted_as_the_judge_is_sent_them(tokenizer_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    for template, fixed in (("consistency", CONSISTENCY_FIXED), ("consistency_compact", COMPACT_FIXED)):
        cfg = validate(GenRMConfig, _cfg("x", max_model_len=4096, template=template))
        request = build_mode(cfg, PromptBuilder(cfg.prompt, cfg.verdict)).fixed_request()
        assert prompt_tokens(request, tokenizer) == fixed, template
        text = request.messages[-1]["content"]
        assert "<candidate-" in text and "</candidate-" in text  # the empty answer is fenced as judged


def test_a_context_that_cannot_hold_the_template_is_refused_before_any_worker_starts(tiny_cache_dir, monkeypatch):
    # The tiny judge with a context of 512, which held the consistency prompt before its fence:
    # the template alone now takes 575 tokens.
    judge_path = str(cached_tiny_judge("1", cache_dir=tiny_cache_dir))
    started = []
    monkeypatch.setattr(environment_module, "start_judge", lambda *args, **kwargs: started.append(args))
    with pytest.raises(ConfigError) as err:
        GenRMEnvironmentImpl(_cfg(judge_path, max_model_len=512))
    message = str(err.value)
    assert f"takes {CONSISTENCY_FIXED} tokens" in message
    assert f"max_model_len 512 minus sampling.max_new_tokens {NEW_TOKENS}" in message
    assert f"leaves {512 - NEW_TOKENS - CONSISTENCY_FIXED} for them" in message
    assert "fewer than prompt.min_answer_tokens (64)" in message
    assert f"judge.max_model_len to at least {CONSISTENCY_FIXED + NEW_TOKENS + 64}" in message
    assert "prompt.template 'consistency'" in message and "consistency_compact" in message
    assert started == []  # refused from the config's tokenizer, before any judge worker starts


def test_the_minimum_left_for_the_answer_is_configurable_to_the_token(tokenizer_path):
    # Room = max_model_len - max_new_tokens - fixed; exactly the minimum passes, one less fails.
    fits = CONSISTENCY_FIXED + NEW_TOKENS + 64
    cfg = _cfg(tokenizer_path, max_model_len=fits)
    GenRMEnvironmentImpl(cfg, judge=_judge(cfg)).shutdown()
    cfg = _cfg(tokenizer_path, max_model_len=fits - 1)
    with pytest.raises(ConfigError, match="leaves 63 for them, fewer than prompt.min_answer_tokens"):
        GenRMEnvironmentImpl(cfg, judge=_judge(cfg))
    cfg = _cfg(tokenizer_path, max_model_len=fits - 1, min_answer_tokens=63)
    GenRMEnvironmentImpl(cfg, judge=_judge(cfg)).shutdown()
    # The short template fits the old 512 with room to spare.
    cfg = _cfg(tokenizer_path, max_model_len=512, template="consistency_compact")
    GenRMEnvironmentImpl(cfg, judge=_judge(cfg)).shutdown()


def test_every_mode_is_measured_with_its_own_template(tokenizer_path):
    cfg = {**_cfg(tokenizer_path, max_model_len=512), "reward": {"mode": "pairwise_group"}}
    with pytest.raises(ConfigError, match="reward.pairwise_group.template 'pairwise'"):
        GenRMEnvironmentImpl(cfg, judge=_judge(cfg))
    cfg = {**_cfg(tokenizer_path, max_model_len=512), "reward": {"mode": "rubric"}}
    with pytest.raises(ConfigError, match="reward.rubric.template 'rubric'"):
        GenRMEnvironmentImpl(cfg, judge=_judge(cfg))


def _logs(answer: str, n: int) -> tuple[list, list]:
    logs = [
        [{"role": "user", "content": f"What is {i} + 1?"}, {"role": "assistant", "content": answer}] for i in range(n)
    ]
    return logs, [{"ground_truth": "1", "question": f"What is {i} + 1?"} for i in range(n)]


def test_a_step_where_every_prompt_is_refused_warns_once_and_counts_no_engine_error(tokenizer_path, caplog):
    # Room for the fields only 4 tokens (the check allowed with min_answer_tokens: 0): the
    # question alone is longer, so even the fully shortened answer cannot fit.
    cfg = _cfg(
        tokenizer_path,
        max_model_len=COMPACT_FIXED + NEW_TOKENS + 4,
        template="consistency_compact",
        min_answer_tokens=0,
    )
    env = GenRMEnvironmentImpl(cfg, judge=_judge(cfg))
    try:
        with caplog.at_level(logging.WARNING, logger="nemo_genrm.env.room"):
            first = env.step(*_logs("The answer is 1", 4))
            metrics = env.last_metrics()
            env.step(*_logs("The answer is 1", 4))
    finally:
        env.shutdown()
    assert first.rewards.tolist() == [0.0] * 4
    assert metrics["genrm/count/too_long"] == 4.0
    assert metrics["genrm/engine_errors"] == 0.0  # a prompt the context cannot hold is not an engine error
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # once, not every step
    assert "every sample of this step (4) was too_long" in warnings[0]
    assert f"judge.max_model_len ({COMPACT_FIXED + NEW_TOKENS + 4})" in warnings[0]
    assert "prompt.answer.max_chars" not in warnings[0]  # no answer was over the character cap


def test_answers_over_the_character_cap_are_cut_and_judged_not_refused(tokenizer_path, caplog):
    # An honest answer longer than prompt.answer.max_chars loses its middle, not its reward.
    cfg = _cfg(tokenizer_path, max_model_len=1024, template="consistency_compact", answer={"max_chars": 40})
    worker = _AgreeWorker()
    judge = PipelineJudge(
        JudgeConfig.model_validate(cfg["judge"]),
        LocalRunner(worker),
        fitter=PromptFitter.for_judge(JudgeConfig.model_validate(cfg["judge"])),
    )
    env = GenRMEnvironmentImpl(cfg, judge=judge)
    try:
        with caplog.at_level(logging.WARNING, logger="nemo_genrm.env.room"):
            out = env.step(*_logs("Answer: 1\n" + "It holds because it was checked. " * 20, 2))
    finally:
        env.shutdown()
    assert [m["genrm"]["reason"] for m in out.metadata] == ["judged", "judged"]
    assert out.answers == ["1", "1"]
    (shown,) = set(worker.shown)
    assert shown.startswith("Answer: 1\nIt holds") and " [...] " in shown
    assert len(shown) <= 40
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_a_refused_prompt_is_not_counted_among_engine_errors():
    results = [
        Generation("1", prompt_tokens=10, output_tokens=1),
        Generation(None, error="prompt_too_long"),
        Generation(None, error="judge_error"),
    ]
    assert JudgeStats.of_call("generate", results).errors == 1
