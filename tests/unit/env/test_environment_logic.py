"""GenRMEnvironmentImpl without Ray: tiny fixed-verdict judges run in process by the real engine."""

from __future__ import annotations

import json
import math
import pickle
import random
from typing import Any

import pytest
import torch

from nemo_genrm.config import ConfigError, JudgeConfig
from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.errors import JudgeClosedError, JudgeUnavailableError
from nemo_genrm.judges.base import Generation, Judge, JudgeStats, LabelScores
from nemo_genrm.judges.transformers import LocalTransformersJudge
from nemo_genrm.samples.types import REASONS, EnvironmentReturn, SampleResult, sample_results
from nemo_genrm.testing import cached_tiny_judge, cached_tiny_model
from nemo_genrm.watchdog import WatchTally

MAX_LEN = 1024


def _cfg(model: str, **sections: Any) -> dict[str, Any]:
    judge = {"model_name": model, "precision": "float32", "max_model_len": MAX_LEN, **sections.pop("judge", {})}
    return {"judge": judge, "resources": {"gpus_per_replica": 0}, **sections}


@pytest.fixture(scope="module")
def judges(tiny_cache_dir: str) -> dict[str, LocalTransformersJudge]:
    """In-process engines: fixed judges answering "1", "0", "maybe", and a random tiny model."""
    paths = {text: str(cached_tiny_judge(text, cache_dir=tiny_cache_dir)) for text in ("1", "0", "maybe")}
    paths["random"] = str(cached_tiny_model(cache_dir=tiny_cache_dir, seed=3))
    workers = {
        name: LocalTransformersJudge(JudgeConfig.model_validate(_cfg(path)["judge"])) for name, path in paths.items()
    }
    yield workers
    for worker in workers.values():
        worker.shutdown()


def _env(judges: dict[str, LocalTransformersJudge], name: str, **sections: Any) -> GenRMEnvironmentImpl:
    worker = judges[name]
    return GenRMEnvironmentImpl(_cfg(worker.config.model_name, **sections), judge=worker)


def _sample(answer: str, question: str = "What is 6 times 7?") -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": f"Working...\nAnswer: {answer}"}]


def _reasons(result: EnvironmentReturn) -> list[str]:
    """Per-sample reasons, read from the observations (present whatever the metadata was)."""
    out = []
    for obs in result.observations:
        text = obs["content"]
        out.append(text[text.index("(") + 1 : -1] if "not scored" in text else "judged")
    return out


# ------------------------------------------------------------------------------ verdicts
@pytest.mark.parametrize("mode", ["zero", "mask"])
@pytest.mark.parametrize(
    ("name", "reward", "reason"), [("1", 1.0, "judged"), ("0", 0.0, "judged"), ("maybe", 0.0, "parse_failure")]
)
def test_rewards_follow_the_judge(judges, name, reward, reason, mode):
    env = _env(judges, name, verdict={"on_parse_failure": mode})
    answers = ["42", "41", "forty-two", "42.0", "6*7", "7"]
    result = env.step([_sample(a) for a in answers], [{"ground_truth": "42"}] * len(answers))
    # reward.verifier: both (the default) beside the judge: the values 41 and 7 differ from 42, so
    # a judge's 1 is lowered to 0 there; forty-two, 42.0 and 6*7 equal 42 and keep the judge's verdict.
    checks = ["equal", "different", "equal", "equal", "equal", "different"]
    rewards = [reward if check == "equal" else 0.0 for check in checks]

    assert isinstance(result, EnvironmentReturn)
    assert EnvironmentReturn._fields == (
        "observations",
        "metadata",
        "next_stop_strings",
        "rewards",
        "terminateds",
        "answers",
    )
    assert result.rewards.dtype == torch.float32 and result.rewards.shape == (6,)
    assert result.rewards.tolist() == rewards
    assert result.terminateds.dtype == torch.bool and result.terminateds.all()
    assert result.next_stop_strings == [None] * 6
    assert result.answers == answers  # the bare values stated (NeMo-RL's cons@k votes on them)
    assert _reasons(result) == [reason] * 6
    assert all(o["role"] == "environment" for o in result.observations)
    masked = mode == "mask" and reason == "parse_failure"
    verdicts = [None if reason != "judged" else int(r) for r in rewards]
    why = "no_label" if reason == "parse_failure" else None  # "maybe" is no label of the strict parser
    assert [m["genrm"] for m in result.metadata] == [
        {"reason": reason, "why": why, "verdict": v, "masked": masked, "verifier": c}
        for v, c in zip(verdicts, checks, strict=True)
    ]
    assert [m["ground_truth"] for m in result.metadata] == ["42"] * 6  # the caller's keys are kept

    metrics = env.last_metrics()
    assert metrics[f"genrm/count/{reason}"] == 6 and metrics[f"genrm/rate/{reason}"] == 1.0
    assert metrics["genrm/masked"] == (6 if masked else 0)
    assert metrics["genrm/verifier/equal"] == 4 and metrics["genrm/verifier/different"] == 2
    assert metrics["genrm/verifier/vetoes"] == (2 if name == "1" else 0)
    # The same decision, typed: what the driver reads instead of the dict.
    assert sample_results(result.metadata, 6) == [
        SampleResult(reason, reward=r, verdict=v, masked=masked, why=why, info={"verifier": c})
        for r, v, c in zip(rewards, verdicts, checks, strict=True)
    ]
    assert metrics.get("genrm/parse_failure/no_label", 0.0) == (6 if why else 0)
    # mask: the failures leave the mean (no sample counts -> nan); zero: they count as 0.
    assert math.isnan(metrics["genrm/mean_reward"]) if masked else metrics["genrm/mean_reward"] == sum(rewards) / 6
    assert metrics["genrm/parse_failure_rate"] == (1.0 if reason == "parse_failure" else 0.0)


def test_the_typed_result_survives_pickling_and_json(judges):
    """``metadata[i]["genrm"]`` crosses Ray (pickle) with its typed result and logs as a plain dict."""
    env = _env(judges, "1")
    metadata = env.step([_sample("42"), _sample("")], [{"ground_truth": "42"}, None]).metadata
    back = pickle.loads(pickle.dumps(metadata))
    none_entry = {"reason": "missing_ground_truth", "why": None, "verdict": None, "masked": False}
    assert back == metadata and back[1] == {"genrm": none_entry}
    assert sample_results(back, 2) == [
        SampleResult("judged", reward=1.0, verdict=1, info={"verifier": "equal"}),
        SampleResult("missing_ground_truth"),  # None metadata comes back as a dict holding its result
    ]
    assert json.loads(json.dumps(back[0]["genrm"])) == {
        "reason": "judged",
        "why": None,
        "verdict": 1,
        "masked": False,
        "verifier": "equal",
    }
    # Another environment's plain dicts carry no typed result.
    assert sample_results([{"genrm": {"reason": "judged", "masked": True}}], 1) == [None]


def test_parse_failures_masked_apart_from_real_zeros(judges):
    # Mixed batch with a "1" judge: 3 judged ones + 2 no-answer zeros. mask mode does not touch
    # no_answer (only parse failures are masked), so the mean is 3 / 5.
    env = _env(judges, "1", verdict={"on_parse_failure": "mask"})
    logs = [_sample("42")] * 3 + [[{"role": "assistant", "content": "Answer:"}]] * 2
    result = env.step(logs, [{"ground_truth": "42"}] * 5)
    assert result.rewards.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert env.last_metrics()["genrm/mean_reward"] == pytest.approx(0.6)
    assert env.last_metrics()["genrm/masked"] == 0


# ------------------------------------------------------------------------------ bad inputs
# 200,000 characters: 200 judge windows, and more than a 32k-token generation holds (linear
# time at scale: tests/unit/prompts/test_extraction.py). 512 draws hold about 50 such cases.
_BIG = "x" * 200_000


def _fuzz_case(kind: str, rng: random.Random) -> tuple[Any, Any, str]:
    """(message log, metadata, expected reason) for one kind of input."""
    answer = str(rng.randint(0, 5))
    good = _sample(answer)
    truth = {"ground_truth": "3"}
    cases: dict[str, tuple[Any, Any, str]] = {
        "valid": (good, truth, "judged"),
        "question_in_metadata": (good, {"ground_truth": "3", "question": "Q?"}, "judged"),
        "numeric_truth": (good, {"ground_truth": 3}, "judged"),
        "unicode": (_sample("\u00e9\u4e2d\u6587 \U0001f600 \u202e\ud800 " + answer), truth, "judged"),
        "huge_tail": ([{"role": "assistant", "content": _BIG + " so " + answer}], truth, "judged"),
        "content_none": ([{"role": "assistant", "content": None}], truth, "bad_input"),
        "content_int": ([{"role": "assistant", "content": 7}], truth, "bad_input"),
        "no_content_key": ([{"role": "assistant"}], truth, "bad_input"),
        "no_assistant": ([{"role": "user", "content": "hi"}], truth, "bad_input"),
        "empty_log": ([], truth, "bad_input"),
        "log_is_string": ("Answer: 3", truth, "bad_input"),
        "message_not_dict": ([["assistant", "Answer: 3"]], truth, "bad_input"),
        "meta_string": (good, "3", "bad_input"),
        "truth_list": (good, {"ground_truth": ["3"]}, "bad_input"),
        "meta_none": (good, None, "missing_ground_truth"),
        "no_truth": (good, {"question": "Q?"}, "missing_ground_truth"),
        "empty_truth": (good, {"ground_truth": "  "}, "missing_ground_truth"),
        "empty_response": ([{"role": "assistant", "content": ""}], truth, "no_answer"),
        "marker_no_answer": ([{"role": "assistant", "content": "Answer:   "}], truth, "no_answer"),
        "huge_answer": ([{"role": "assistant", "content": "Answer: " + _BIG}], truth, "judged"),  # cut, not refused
        "hedged": ([{"role": "assistant", "content": "Answer: 41\nAnswer: 42"}], truth, "hedged"),
    }
    return cases[kind]


FUZZ_KINDS = (
    "valid",
    "question_in_metadata",
    "numeric_truth",
    "unicode",
    "huge_tail",
    "content_none",
    "content_int",
    "no_content_key",
    "no_assistant",
    "empty_log",
    "log_is_string",
    "message_not_dict",
    "meta_string",
    "truth_list",
    "meta_none",
    "no_truth",
    "empty_truth",
    "empty_response",
    "marker_no_answer",
    "huge_answer",
    "hedged",
)


def test_fuzzed_bad_inputs_keep_length_order_and_reasons(judges):
    rng = random.Random(1234)
    kinds = [rng.choice(FUZZ_KINDS) for _ in range(512)]
    cases = [_fuzz_case(k, rng) for k in kinds]
    env = _env(judges, "1", reward={"verifier": "none"})  # the judge alone: every judged sample gets its 1
    result = env.step([c[0] for c in cases], [c[1] for c in cases])

    expected = [c[2] for c in cases]
    assert len(result.rewards) == len(result.observations) == len(result.metadata) == len(result.answers) == 512
    assert _reasons(result) == expected
    assert result.rewards.tolist() == [1.0 if r == "judged" else 0.0 for r in expected]
    # Every entry comes back a dict with its result; metadata that is not a dict under "metadata".
    assert [m["genrm"]["reason"] for m in result.metadata] == expected
    assert [m.get("metadata") for m, c in zip(result.metadata, cases, strict=True) if not isinstance(c[1], dict)] == [
        c[1] for c in cases if not isinstance(c[1], dict)
    ]
    assert all((a is None) == (r != "judged") for a, r in zip(result.answers, expected, strict=True))
    metrics = env.last_metrics()
    for reason in REASONS:
        assert metrics[f"genrm/count/{reason}"] == expected.count(reason)
    assert set(expected) >= {"judged", "bad_input", "missing_ground_truth", "no_answer", "hedged"}


def test_empty_batch_and_none_metadata(judges):
    env = _env(judges, "1")
    for metadata in ([], None):
        result = env.step([], metadata)
        assert result.rewards.shape == (0,) and result.terminateds.shape == (0,)
        assert result.observations == result.metadata == result.answers == result.next_stop_strings == []
    result = env.step([_sample("1")], None)  # no metadata at all: nothing to compare with
    assert _reasons(result) == ["missing_ground_truth"]


def test_metadata_of_another_length_raises(judges):
    env = _env(judges, "1")
    with pytest.raises(ValueError, match="2 entries for 1 samples"):
        env.step([_sample("1")], [{"ground_truth": "1"}] * 2)


# ------------------------------------------------------------------------------ dedup
@pytest.mark.parametrize("dedup", [True, False])
def test_duplicates_are_judged_once(judges, dedup):
    env = _env(judges, "0", reward={"dedup": dedup})
    worker = judges["0"]
    answers = [str(i) for i in range(6)] * 2  # every answer twice
    before = worker.stats().prompts_generated
    result = env.step([_sample(a) for a in answers], [{"ground_truth": "9"}] * 12)
    sent = worker.stats().prompts_generated - before
    assert sent == (6 if dedup else 12)
    assert env.last_metrics()["genrm/judge_prompts"] == sent
    assert env.last_metrics()["genrm/dedup_hits"] == 12 - sent
    assert result.answers == answers and result.rewards.tolist() == [0.0] * 12


# ------------------------------------------------------------------------------ probability
def test_probability_reward_and_binary_argmax(judges):
    # The judge's probabilities alone (no verifier lowering the answers that are not 14).
    logprobs = {"judge": {"verdict_from": "logprobs"}, "reward": {"verifier": "none"}}
    prob_env = _env(judges, "random", **{**logprobs, "reward": {"kind": "probability", "verifier": "none"}})
    binary_env = _env(judges, "random", **logprobs)
    logs = [_sample(str(i * 7)) for i in range(8)]
    meta = [{"ground_truth": "14"}] * 8
    probs = prob_env.step(logs, meta).rewards
    binary = binary_env.step(logs, meta).rewards
    assert ((probs > 0) & (probs < 1)).all() and len(set(probs.tolist())) > 1  # real probabilities
    # Two labels renormalised: the positive label wins the argmax exactly when P(positive) > 0.5.
    assert binary.tolist() == [float(p > 0.5) for p in probs.tolist()]
    # The fixed "1" judge puts (almost) all mass on the positive label.
    sure = (
        _env(judges, "1", **{**logprobs, "reward": {"kind": "probability", "verifier": "none"}})
        .step(logs, meta)
        .rewards
    )
    assert (sure > 0.999).all()


# ------------------------------------------------------------------------------ metrics
def test_metrics_keys_and_global_aggregation(judges):
    env = _env(judges, "1")
    env.step([_sample("1")] * 2, [{"ground_truth": "1"}] * 2)
    env.step([_sample("2"), [{"role": "assistant", "content": ""}]], [{"ground_truth": "1"}] * 2)
    last = env.last_metrics()
    expected = {
        "genrm/mean_reward",
        "genrm/num_samples",
        "genrm/masked",
        "genrm/judge_prompts",
        "genrm/dedup_hits",
        "genrm/parse_failure_rate",
        "genrm/parse_failure/truncated",
        "genrm/prompt_tokens",
        "genrm/output_tokens",
        "genrm/truncated_prompts",
        "genrm/engine_errors",
        "genrm/judge_restarts",
        "genrm/deadline_exceeded",
        "genrm/judge_unavailable",
        "genrm/judge_node_losses",
        "genrm/judge_latency_s",
        "genrm/judge_latency_s/p50",
        "genrm/judge_latency_s/p95",
        "genrm/step_time_s",
        "genrm/wake_s",
        "genrm/sleep_s",
        *(f"genrm/{kind}/{r}" for kind in ("count", "rate") for r in REASONS),
        # reward.verifier: both (the default)
        *(
            f"genrm/verifier/{name}"
            for name in (
                "checked",
                "equal",
                "different",
                "undecided",
                "undecided/reference",
                "undecided/answer",
                "disagreements",
                "vetoes",
                "undecided_rate",
            )
        ),
        # reward.watchdog (on by default): its counters, from the first step (no canary yet at 2 prompts)
        *WatchTally().metrics(),
    }
    assert set(last) == expected
    # The judge says 1 to "2" against the reference 1; the verifier finds 2 different: reward 0.
    assert last["genrm/num_samples"] == 2 and last["genrm/mean_reward"] == 0.0 and last["genrm/verifier/vetoes"] == 1
    assert last["genrm/prompt_tokens"] > 0 and last["genrm/output_tokens"] == 2  # "1" + EOS
    batch = {"rewards": torch.ones(4)}
    same, total = env.global_post_process_and_metrics(batch)
    assert same is batch
    assert total["genrm/num_samples"] == 4 and total["genrm/mean_reward"] == 0.5
    assert total["genrm/judge_prompts"] == 2 and total["genrm/dedup_hits"] == 1
    assert 0 < total["genrm/judge_latency_s/p50"] <= total["genrm/judge_latency_s/p95"]
    assert env.global_post_process_and_metrics(batch)[1]["genrm/num_samples"] == 0  # reset after reading


# ------------------------------------------------------------------------------ failures
class _FailingJudge(Judge):
    """An engine that fails: raises on every call, or returns per-sample errors."""

    def __init__(self, error: str | None):
        self.error = error

    def generate(self, batch):
        if self.error is None:
            raise RuntimeError("engine exploded")
        return [Generation(text=None, error=self.error) for _ in batch]

    def score(self, batch, labels):
        return [LabelScores(probs=None, error=self.error) for _ in batch]

    def stats(self):
        return JudgeStats()

    def reset_stats(self):
        pass


@pytest.mark.parametrize(
    ("error", "reason"), [(None, "judge_error"), ("timeout", "judge_error"), ("prompt_too_long", "too_long")]
)
def test_engine_failures_become_reasons(judges, error, reason):
    model = judges["1"].config.model_name
    env = GenRMEnvironmentImpl(_cfg(model), judge=_FailingJudge(error))
    result = env.step([_sample("1"), [{"role": "assistant", "content": None}]], [{"ground_truth": "1"}] * 2)
    assert _reasons(result) == [reason, "bad_input"]
    assert result.rewards.tolist() == [0.0, 0.0]


class _RaisingJudge(Judge):
    """An engine whose generate and score raise the given exception."""

    def __init__(self, exc: Exception):
        self.exc = exc

    def generate(self, batch):
        raise self.exc

    def score(self, batch, labels):
        raise self.exc

    def stats(self):
        return JudgeStats()

    def reset_stats(self):
        pass


@pytest.mark.parametrize("verdict_from", ["text", "logprobs"])
def test_config_and_shutdown_errors_propagate_runtime_errors_do_not(judges, verdict_from):
    model = judges["1"].config.model_name
    cfg = _cfg(model, judge={"verdict_from": verdict_from})
    batch, meta = [_sample("1"), _sample("2")], [{"ground_truth": "1"}] * 2

    env = GenRMEnvironmentImpl(cfg, judge=_RaisingJudge(ConfigError("labels cannot be scored")))
    with pytest.raises(ConfigError, match="labels cannot be scored"):
        env.step(batch, meta)
    env = GenRMEnvironmentImpl(cfg, judge=_RaisingJudge(JudgeClosedError("HttpJudge was shut down; create a new one")))
    with pytest.raises(JudgeClosedError, match="shut down"):
        env.step(batch, meta)
    env = GenRMEnvironmentImpl(cfg, judge=_RaisingJudge(JudgeUnavailableError("restart budget spent", 12.0)))
    with pytest.raises(JudgeUnavailableError, match="unavailable for 12.0 s: restart budget spent"):
        env.step(batch, meta)

    # Fatal is decided by type: an engine's own RuntimeError, whatever its words, is per-sample.
    for error in (RuntimeError("boom"), RuntimeError("the connection was shut down by the peer")):
        env = GenRMEnvironmentImpl(cfg, judge=_RaisingJudge(error))
        result = env.step(batch, meta)  # a genuine engine failure: per-sample judge_error, no raise
        assert _reasons(result) == ["judge_error", "judge_error"]
        assert result.rewards.tolist() == [0.0, 0.0]
        assert env.last_metrics()["genrm/count/judge_error"] == 2


def test_every_engine_and_the_environment_raise_judge_closed_after_shutdown(judges):
    env = GenRMEnvironmentImpl(_cfg(judges["1"].config.model_name), judge=judges["1"])
    env.shutdown()
    with pytest.raises(JudgeClosedError):
        env.step([_sample("1")], [{"ground_truth": "1"}])
    assert issubclass(JudgeClosedError, RuntimeError)  # callers catching RuntimeError still do
    worker = LocalTransformersJudge(judges["1"].config)  # the in-process engine, closed for good
    worker.shutdown()
    for call in (
        lambda: worker.generate([_sample("1")]),
        lambda: worker.score([_sample("1")], ["1", "0"]),
        lambda: worker.top_logprobs([_sample("1")], 2),
    ):
        with pytest.raises(JudgeClosedError):
            call()


class _Recorder(Judge):
    """Wraps a real engine and records the calls made to it."""

    def __init__(self, inner: Judge):
        self.inner, self.calls = inner, []

    def generate(self, batch):
        self.calls.append("generate")
        return self.inner.generate(batch)

    def score(self, batch, labels):
        self.calls.append("score")
        return self.inner.score(batch, labels)

    def sleep(self):
        self.calls.append("sleep")
        self.inner.sleep()

    def wake(self):
        self.calls.append("wake")
        self.inner.wake()

    def stats(self):
        return self.inner.stats()

    def reset_stats(self):
        self.inner.reset_stats()


def test_colocated_judge_sleeps_between_steps(judges):
    recorder = _Recorder(judges["1"])
    cfg = _cfg(judges["1"].config.model_name)
    cfg["resources"] = {"placement": "colocated", "gpus_per_replica": 1}
    env = GenRMEnvironmentImpl(cfg, judge=recorder)
    assert recorder.calls == ["sleep"] and judges["1"].asleep  # asleep until the first step
    result = env.step([_sample("1")], [{"ground_truth": "1"}])
    assert result.rewards.tolist() == [1.0]
    assert recorder.calls == ["sleep", "wake", "generate", "sleep"] and judges["1"].asleep
    env.step([[{"role": "assistant", "content": ""}]], [{"ground_truth": "1"}])  # nothing to judge
    assert recorder.calls[-1] == "sleep" and len(recorder.calls) == 4  # no wake for nothing
    judges["1"].wake()


def test_sleep_buffers_auto_means_at_load_only_for_a_colocated_judge(judges):
    # The environment puts only a colocated judge to sleep: that one gets its host buffers at load
    # (first sleep at copy speed); any other keeps no host copy of its weights.
    cfg = _cfg(judges["1"].config.model_name)
    separate = GenRMEnvironmentImpl(cfg, judge=judges["1"])
    assert separate._judge_config().dtensor.sleep_buffers == "auto"
    cfg["resources"] = {"placement": "colocated", "gpus_per_replica": 1}
    colocated = GenRMEnvironmentImpl(cfg, judge=judges["1"])
    assert colocated._judge_config().dtensor.sleep_buffers == "at_load"
    judges["1"].wake()
    cfg["judge"]["dtensor"] = {"sleep_buffers": "at_first_sleep"}  # a user's explicit choice wins
    assert GenRMEnvironmentImpl(cfg, judge=judges["1"])._judge_config().dtensor.sleep_buffers == "at_first_sleep"
    judges["1"].wake()


def test_bad_config_lists_every_problem(judges):
    cfg = _cfg(judges["1"].config.model_name, reward={"kind": "probability", "dedupe": True})
    with pytest.raises(ConfigError) as err:
        GenRMEnvironmentImpl(cfg, judge=judges["1"])
    text = "\n".join(err.value.problems)
    assert "env.genrm.reward.dedupe: unknown key" in text and "did you mean 'dedup'" in text
    cfg["reward"] = {"kind": "probability"}
    with pytest.raises(ConfigError, match="needs judge.verdict_from: logprobs"):
        GenRMEnvironmentImpl(cfg, judge=judges["1"])


def test_shutdown_is_idempotent_and_step_after_raises(judges):
    env = _env(judges, "1")
    env.shutdown()
    env.shutdown()
    assert judges["1"].model is not None  # an injected judge belongs to the caller
    with pytest.raises(RuntimeError, match="shut down"):
        env.step([_sample("1")], [{"ground_truth": "1"}])


def test_the_registered_actor_path_names_the_environment():
    """NeMo-RL starts the actor from its registered class path; the env/ package keeps it valid."""
    import importlib

    from nemo_genrm.env.environment import GenRMEnvironment
    from nemo_genrm.integrations.nemo_rl import ACTOR_FQN

    module, _, name = ACTOR_FQN.rpartition(".")
    assert getattr(importlib.import_module(module), name) is GenRMEnvironment
