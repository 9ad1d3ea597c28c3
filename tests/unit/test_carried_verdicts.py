"""Identical answers in different step calls share one judge prompt when they land in one window.

NeMo-RL's asynchronous rollout sends each sample in its own ``step`` call as its generation
finishes; calls that arrive while a judge call runs wait for the next one. An answer identical
to one the running judge call is asking about (same question, reference and answer) takes that
verdict instead of a prompt of its own, once: the judge call after that asks again. The
stand-in judge blocks until the test lets it go, so which call lands in which window is fixed.
"""

from __future__ import annotations

import threading
import time

from nemo_genrm.env.environment import GenRMEnvironmentImpl
from nemo_genrm.judges.base import Generation, Judge, JudgeStats
from nemo_genrm.testing.stand_in_judges import shown_responses


class _GatedJudge(Judge):
    """Says 1 for the answer 42, else 0; each engine call waits for :attr:`go`."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []  # answers asked about, per engine call
        self.go = threading.Event()
        self.entered = threading.Event()

    def generate(self, batch):
        # The judge is shown the final answer with its words around it: here the box alone.
        shown = [shown_responses(request.messages[-1]["content"])[0] for request in batch]
        answers = [text.removeprefix("\\boxed{").removesuffix("}") for text in shown]
        self.calls.append(answers)
        self.entered.set()
        assert self.go.wait(30)
        return [Generation(text="1" if a == "42" else "0") for a in answers]

    def score(self, batch, labels):
        raise NotImplementedError

    def stats(self):
        return JudgeStats(generate_calls=len(self.calls))

    def reset_stats(self):
        pass


def _step(env: GenRMEnvironmentImpl, answer: str, out: list) -> threading.Thread:
    log = [{"role": "user", "content": "What is 6 times 7?"}, {"role": "assistant", "content": f"\\boxed{{{answer}}}"}]
    thread = threading.Thread(target=lambda: out.append((answer, env.step([log], [{"ground_truth": "42"}]))))
    thread.start()
    return thread


def _settle(env: GenRMEnvironmentImpl, seconds: float = 0.3) -> None:
    time.sleep(seconds)  # the calls started have joined the open batch (max_wait_ms 0 + running batch)


def test_answers_waiting_behind_a_judge_call_share_its_verdicts():
    judge = _GatedJudge()
    env = GenRMEnvironmentImpl(
        {"judge": {"model_name": "stand-in"}, "resources": {"gpus_per_replica": 0}, "coalesce": {"max_wait_ms": 0}},
        judge=judge,
    )
    out: list = []
    first = _step(env, "42", out)  # window 1: the judge is asked about 42 and holds
    assert judge.entered.wait(10)
    waiting = [_step(env, a, out) for a in ("42", "42", "41")]  # arrive while window 1 runs
    _settle(env)
    judge.go.set()
    for thread in [first, *waiting]:
        thread.join(10)
    _, metrics = env.global_post_process_and_metrics(None)
    # Before: the second judge call asked about 42 again. Now 42's verdict from the first is shared.
    assert judge.calls == [["42"], ["41"]]
    assert sorted((a, r.rewards.item()) for a, r in out) == [("41", 0.0), ("42", 1.0), ("42", 1.0), ("42", 1.0)]
    assert [r.metadata[0]["genrm"]["reason"] for _, r in out] == ["judged"] * 4
    assert metrics["genrm/judge_prompts"] == 2 and metrics["genrm/dedup_hits"] == 2
    # A verdict passes on one window only: 42 arriving after the second call is asked again.
    _step(env, "42", out).join(10)
    assert judge.calls[-1] == ["42"]


def test_without_dedup_every_answer_is_asked():
    judge = _GatedJudge()
    env = GenRMEnvironmentImpl(
        {
            "judge": {"model_name": "stand-in"},
            "resources": {"gpus_per_replica": 0},
            "coalesce": {"max_wait_ms": 0},
            "reward": {"dedup": False},
        },
        judge=judge,
    )
    out: list = []
    first = _step(env, "42", out)
    assert judge.entered.wait(10)
    second = _step(env, "42", out)
    _settle(env)
    judge.go.set()
    first.join(10)
    second.join(10)
    assert judge.calls == [["42"], ["42"]]
