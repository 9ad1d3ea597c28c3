"""The one judge pipeline over an in-process runner: chunks planned once, results in order, counts per call."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nemo_genrm.config import JudgeConfig
from nemo_genrm.judges.base import JudgeRequest, JudgeStats
from nemo_genrm.judges.fitting import FittedPrompt, PromptFitter, plan_batches
from nemo_genrm.judges.pipeline import LocalRunner, PipelineJudge
from nemo_genrm.judges.results import CallCounter
from nemo_genrm.testing import cached_tiny_tokenizer


class _EchoWorker:
    """Token-level protocol without a model: replies with the prompt length, records each chunk."""

    MAX_PADDING = {"generate_fitted": 0.25}

    def __init__(self) -> None:
        self.chunks: list[list[int]] = []

    def generate_fitted(self, prompts: Sequence[FittedPrompt]) -> list[tuple[str, int]]:
        self.chunks.append([p.num_tokens for p in prompts])
        return [(str(p.num_tokens), 2) for p in prompts]

    def score_fitted(self, prompts: Sequence[FittedPrompt], labels: Sequence[str]) -> list[dict]:
        self.chunks.append([p.num_tokens for p in prompts])
        return [{label: 1.0 / len(labels) for label in labels} for _ in prompts]

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


@pytest.fixture
def judge(tiny_cache_dir):
    path = str(cached_tiny_tokenizer())
    config = JudgeConfig.model_validate(
        {
            "model_name": path,
            "max_model_len": 64,
            "sampling": {"max_new_tokens": 4},
            "batching": {"max_batch_size": 2, "max_tokens_per_batch": 4096},
        }
    )
    worker = _EchoWorker()
    judge = PipelineJudge(config, LocalRunner(worker), fitter=PromptFitter.for_judge(config))
    judge.worker = worker
    return judge


def _requests(words: Sequence[int]) -> list[JudgeRequest]:
    return [JudgeRequest(({"role": "user", "content": " ".join(["word"] * n)},)) for n in words]


def test_chunks_are_planned_once_and_results_come_back_in_input_order(judge):
    requests = _requests([1, 5, 3, 2, 4])
    fitted = judge.fitter.fit(requests)
    gens = judge.generate(requests)
    # Each reply is its own prompt's length: any swap would show.
    assert [g.text for g in gens] == [str(f.num_tokens) for f in fitted]
    # The worker got the planned chunks as they are (longest first, at most max_batch_size,
    # the engine's padding bound), not re-planned.
    lengths = [f.num_tokens for f in fitted]
    plan = plan_batches(lengths, max_batch_size=2, max_tokens_per_batch=4096, max_new_tokens=4, max_padding=0.25)
    assert judge.worker.chunks == [[lengths[i] for i in chunk] for chunk in plan]
    assert len(plan) >= 3 and all(len(c) <= 2 for c in judge.worker.chunks)


def test_each_call_comes_with_its_own_counts_read_from_its_results(judge):
    too_long = JudgeRequest(({"role": "user", "content": "word " * 200},))  # nothing to shorten
    gens, counts = judge.generate_counted([*_requests([2, 3]), too_long])
    assert [g.error for g in gens] == [None, None, "prompt_too_long"]
    # A prompt the context cannot hold is its sample's too_long, not an engine error.
    assert counts.generate_calls == 1 and counts.prompts_generated == 3 and counts.errors == 0
    assert counts.prompt_tokens == sum(g.prompt_tokens for g in gens) > 0
    assert counts.output_tokens == 4  # two replies of 2 tokens; the refused prompt ran nothing
    scores, counted = judge.score_counted(_requests([2]), ["1", "0"])
    assert scores[0].probs == {"1": 0.5, "0": 0.5} and counted.score_calls == 1
    total = judge.stats()
    assert total.prompts_generated == 3 and total.prompts_scored == 1 and total.errors == 0


def test_a_call_counter_counts_only_the_calls_made_through_it(judge):
    mine, theirs = CallCounter(judge), CallCounter(judge)
    mine.generate(_requests([2, 3]))
    theirs.generate(_requests([4]))  # another caller of the same judge, in between
    mine.score(_requests([5]), ["1", "0"])
    assert (mine.counts.prompts_generated, mine.counts.prompts_scored) == (2, 1)
    assert (theirs.counts.prompts_generated, theirs.counts.prompts_scored) == (1, 0)
    assert mine.counts.output_tokens == 4 and theirs.counts.output_tokens == 2
    assert judge.stats().prompts_generated == 3


def test_a_judge_without_its_own_counts_is_counted_from_its_results():
    from nemo_genrm.testing.rule_judges import RuleJudge

    judge = RuleJudge(lambda text: "1", fail_when=lambda text: "bad" in text)
    counter = CallCounter(judge)
    counter.generate([[{"role": "user", "content": "good"}], [{"role": "user", "content": "bad"}]])
    assert counter.counts == JudgeStats(generate_calls=1, prompts_generated=2, errors=1)


class _QueueWorker(_EchoWorker):
    """A worker that schedules its own queue (continuous batching)."""

    QUEUE_METHODS = ("generate_fitted",)


class _TwoReplicas(LocalRunner):
    num_alive = 2


def test_a_worker_that_schedules_its_queue_gets_one_queue_per_replica(judge):
    requests = _requests([1, 5, 3, 2, 4])
    lengths = [f.num_tokens for f in judge.fitter.fit(requests)]
    for runner, shares in ((LocalRunner(_QueueWorker()), 1), (_TwoReplicas(_QueueWorker()), 2)):
        queued = PipelineJudge(judge.config, runner, fitter=judge.fitter)
        gens = queued.generate(requests)
        assert [g.text for g in gens] == [str(n) for n in lengths]  # still in input order
        # Not cut at max_batch_size 2: the whole call, dealt longest first in turns.
        ranked = sorted(lengths, reverse=True)
        assert runner.worker.chunks == [ranked[k::shares] for k in range(shares)]
