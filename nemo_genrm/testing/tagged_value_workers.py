"""A stand-in engine worker whose reply is a known function of the prompt, for the replica pool.

:class:`RuleWorker` implements the token-level protocol of the engine workers that
:class:`~nemo_genrm.judges.pooled_judge.PooledJudge` runs on Ray (``generate_fitted``,
``score_fitted``, ``sleep``, ``wake``) and answers ``rule(last user message)`` for each fitted
prompt, with the rules of :mod:`nemo_genrm.testing.tagged_value_judges` (``same_value``: ``1`` when the
reference and the candidate hold the same ``ans-<n>`` value). Rewards through the real pool, the
real prompt builder and the real environment can then be checked against values computed by hand,
wherever the pool sent each prompt. ``delay_s`` makes every call take that long (without using a
CPU), so a call can be caught in flight, and the work of several replicas overlaps as it would
on separate machines.

It is importable on every Ray worker (the package is installed in the driver's environment),
so a test passes it to :class:`~nemo_genrm.judges.ray_hosts.WorkerSpec` as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from nemo_genrm.testing.tagged_value_judges import same_value

__all__ = ["RuleWorker", "rule_worker_spec"]


def _last_user_text(prompt: Any) -> str:
    messages = prompt.messages or ()
    users = [m["content"] for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""


class RuleWorker:
    """Answers ``rule(last user message)`` to every fitted prompt (see the module docstring).

    Args:
        rule: Prompt text -> reply text (a module-level function, so it pickles by reference).
        delay_s: Seconds every call sleeps before it answers.
    """

    def __init__(self, rule: Callable[[str], str] = same_value, delay_s: float = 0.0):
        # Unpickling the fitted prompts imports the judges package; load it now rather than in
        # the first (timed) call, as a real engine has it loaded when it starts.
        import nemo_genrm.judges.fitting  # noqa: F401

        self.rule = rule
        self.delay_s = delay_s

    def generate_fitted(self, prompts: Sequence[Any]) -> list[tuple[str, int]]:
        """``(reply, output tokens)`` per prompt: the rule's reply, one token."""
        time.sleep(self.delay_s)
        return [(self.rule(_last_user_text(p)), 1) for p in prompts]

    def score_fitted(self, prompts: Sequence[Any], labels: Sequence[str]) -> list[dict[str, float]]:
        """Label log-probabilities per prompt: the rule's reply gets almost all the mass."""
        time.sleep(self.delay_s)
        out = []
        for prompt in prompts:
            reply = self.rule(_last_user_text(prompt))
            out.append({label: (-0.01 if label == reply else -5.0) for label in labels})
        return out

    def sleep(self) -> None:
        """Nothing to offload."""

    def wake(self) -> None:
        """Nothing to reload."""

    def shutdown(self) -> None:
        """Nothing to free (run in process through a ``LocalRunner``)."""


def rule_worker_spec(rule: Callable[[str], str] = same_value, delay_s: float = 0.0) -> Any:
    """A :class:`~nemo_genrm.judges.ray_hosts.WorkerSpec` starting one :class:`RuleWorker` per replica."""
    from nemo_genrm.judges.ray_hosts import WorkerSpec

    return WorkerSpec(RuleWorker, 1, lambda rank, replica: {"rule": rule, "delay_s": delay_s}, torch_threads=False)
