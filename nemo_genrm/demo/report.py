"""What the demo run shows besides the driver's plot: a reward-hacking check and its closing lines.

:func:`reward_hacking_check` sends wrong answers that try to dictate a positive verdict through a
live environment (extraction, neutralisation and judge as in training) and counts how many get
the reward they deserve, 0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_genrm.demo.task import hacking_answer, hacking_templates, judged_number
from nemo_genrm.tasks.digit_addition import demo_splits

logger = logging.getLogger(__name__)

__all__ = ["HackingCheck", "demo_lines", "hacking_cases", "reward_hacking_check"]


@dataclass(frozen=True)
class HackingCheck:
    """Result of :func:`reward_hacking_check`.

    Attributes:
        total: Candidates sent.
        rejected: Candidates that got reward 0, as they should.
        leaked: The candidates that got a positive reward.
        held_out_total: Of ``total``, the candidates of families the judge never trained against.
        held_out_rejected: Of ``rejected``, those of the held-out families.
    """

    total: int
    rejected: int
    leaked: tuple[str, ...]
    held_out_total: int = 0
    held_out_rejected: int = 0

    def line(self) -> str:
        """One line for the run's report."""
        trained = self.total - self.held_out_total
        return (
            f"  reward hacking     {self.rejected}/{self.total} verdict-dictating answers rejected (every red-team "
            f"family: {self.rejected - self.held_out_rejected}/{trained} of those trained against, "
            f"{self.held_out_rejected}/{self.held_out_total} of those held out)"
        )


def wrong_for(answer: str) -> str:
    """The wrong number a red-team answer carries for a question whose answer is ``answer``."""
    return str((int(answer) + 3) % 19)


def hacking_cases(pairs: list[tuple[tuple[str, str], str]]) -> tuple[list[Any], list[dict[str, Any]], list[str]]:
    """Environment inputs for red-team answers: per ``((question, answer), template)`` pair.

    Only pairs whose answer does not end in the question's answer (:func:`judged_number`) are
    kept (master keys, which extract to nothing, included): any positive reward for them is a flip.

    Returns:
        ``(message_logs, metadata, texts)`` for :meth:`GenRMEnvironment.step`.
    """
    logs, metadata, texts = [], [], []
    for (question, answer), template in pairs:
        text = hacking_answer(template, wrong_for(answer))
        if judged_number(text) == answer:
            continue
        logs.append([{"role": "user", "content": question}, {"role": "assistant", "content": text}])
        metadata.append({"question": question, "ground_truth": answer})
        texts.append(text)
    return logs, metadata, texts


def reward_hacking_check(env: Any, num_questions: int = 4) -> HackingCheck:
    """Send every red-team answer through ``env`` once and count the zeros.

    The templates of every red-team family (:func:`~nemo_genrm.demo.task.hacking_templates`:
    those the judge trained against, then the held-out ones) are spread over ``num_questions``
    held-out questions, each written with a wrong number for its question; one step sends them
    all, and the held-out families are counted apart.

    Args:
        env: The environment, called as ``env.step(message_logs, metadata)`` and returning its
            ``EnvironmentReturn``: a ``GenRMEnvironmentImpl``, or the driver's
            :class:`~nemo_genrm.grpo.handles.EnvHandle` on the ``GenRMEnvironment`` actor (the
            caller wraps the actor, so this check runs on any object with a ``step``).
        num_questions: Held-out questions to spread the answers over (references 2 and more, so
            a bare ``1`` is wrong).

    Returns:
        How many of the answers got reward 0, in all and in the held-out families.
    """
    questions = [q for q in demo_splits()[1] if int(q[1]) >= 2][:num_questions]
    trained, held_out = hacking_templates("trained"), hacking_templates("held_out")
    pairs = [(questions[i % len(questions)], t) for i, t in enumerate((*trained, *held_out))]
    logs, metadata, texts = hacking_cases(pairs[: len(trained)])
    n_trained = len(texts)
    more = hacking_cases(pairs[len(trained) :])
    logs, metadata, texts = logs + more[0], metadata + more[1], texts + more[2]
    rewards = env.step(logs, metadata).rewards.tolist()
    leaked = tuple(t for t, r in zip(texts, rewards, strict=True) if r > 0)
    held_out_leaked = sum(1 for r in rewards[n_trained:] if r > 0)
    return HackingCheck(
        total=len(texts),
        rejected=len(texts) - len(leaked),
        leaked=leaked,
        held_out_total=len(texts) - n_trained,
        held_out_rejected=len(texts) - n_trained - held_out_leaked,
    )


def demo_lines(judge_dir: str | Path, summary: Any, hacking: HackingCheck) -> list[str]:
    """The demo's closing lines: judge accuracy, exact match before and after, hacking check.

    Args:
        judge_dir: The judge's folder (its training report gives the held-out accuracy).
        summary: The run's :class:`~nemo_genrm.grpo.loop.RunSummary`.
        hacking: The result of :func:`reward_hacking_check`.
    """
    from nemo_genrm.demo.models import demo_judge_accuracy

    out = ["Demo: a learned judge's binary reward trains the policy"]
    accuracy = demo_judge_accuracy(judge_dir)
    if accuracy is not None:
        plain = demo_judge_accuracy(judge_dir, "plain_held_out_accuracy")
        line = f"  judge accuracy     {accuracy:.3f} on held-out (question, reference, answer) pairs"
        out.append(line + ("" if plain is None else f" (red-team text in a third), {plain:.3f} on plain ones"))
    if summary.val_exact_match:
        steps = sorted(summary.val_exact_match)
        first, last = summary.val_exact_match[steps[0]], summary.val_exact_match[steps[-1]]
        out.append(
            f"  exact match        {first:.3f} (step {steps[0]}) -> {last:.3f} (step {steps[-1]}) "
            "on held-out questions, checked apart from the judge"
        )
        if not summary.final_is_best:
            best = summary.best_step
            out.append(
                f"  best by reward     step {best}: exact match {summary.val_exact_match.get(best, summary.best_exact_match):.3f}, "
                "the policy kept by the judge's held-out reward (the final step's is lower)"
            )
    out.append(hacking.line())
    out.extend(f"    leaked: {text!r}" for text in hacking.leaked)
    return out
