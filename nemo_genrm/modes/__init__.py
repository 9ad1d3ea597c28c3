"""Reward modes (``reward.mode``) and the voting and order-swap options, over the same judge engines.

- ``reference`` (default): the answer against the reference
  (:class:`~nemo_genrm.modes.reference.ReferenceMode`; plain reference mode is one vote of one
  judge in one order, and ``reward.votes``, ``reward.judges`` and ``reward.swap`` add to it);
- ``pairwise_group``: win rate within the GRPO group (:mod:`nemo_genrm.modes.pairwise`);
- ``rubric``: weighted share of rubric items met (:mod:`nemo_genrm.modes.rubric`).

Every mode gets the judge through the same :data:`~nemo_genrm.modes.base.Ask` (one batched call
per voting judge, verdicts from text or logprobs) and returns one
:class:`~nemo_genrm.samples.types.SampleResult` per sample; :func:`assemble` turns those into
NeMo-RL's ``EnvironmentReturn``.
"""

from __future__ import annotations

from collections.abc import Iterable

from nemo_genrm.config import GenRMConfig
from nemo_genrm.guard.injection import nonce_key
from nemo_genrm.modes.assemble import assemble
from nemo_genrm.modes.ballot import Panel
from nemo_genrm.modes.base import Ask, Counters, Mode, Presenter, Reader, Vote, neutraliser, read_replies
from nemo_genrm.prompts import PromptBuilder, template_labels_from_config
from nemo_genrm.samples.metrics import mode_metrics
from nemo_genrm.verdicts import CHOICE_VALUES, VerdictParser

__all__ = [
    "Ask",
    "Counters",
    "Mode",
    "Reader",
    "Vote",
    "assemble",
    "binary_reader",
    "build_mode",
    "choice_reader",
    "mode_metrics",
    "read_replies",
]


def binary_reader(cfg: GenRMConfig) -> Reader:
    """The environment's binary verdict: positive label -> 1, negative -> 0."""
    verdict = cfg.verdict
    return Reader((verdict.positive, verdict.negative), (1, 0), VerdictParser.from_config(verdict))


def choice_reader(cfg: GenRMConfig) -> Reader:
    """The pairwise verdict: first choice marker -> ``"A"``, second -> ``"B"``."""
    markers = tuple(cfg.verdict.choice_markers)
    parser = VerdictParser("choice", choice_markers=markers)
    return Reader((markers[0], markers[1]), CHOICE_VALUES, parser)


def build_mode(cfg: GenRMConfig, builder: PromptBuilder, special_tokens: Iterable[str] = ()) -> Mode:
    """The mode the config asks for (the environment builds it once, in its constructor).

    Args:
        cfg: The validated ``env.genrm`` config.
        builder: The environment's prompt builder (reference mode).
        special_tokens: The judge tokenizer's special tokens, neutralised in policy text.

    Raises:
        ConfigError: A mode template or rubric file that cannot be loaded.
    """
    reward = cfg.reward
    members = 1 + len(reward.judges)
    binary = Panel(binary_reader(cfg), votes=reward.votes, members=members)
    presenter = Presenter(neutraliser(cfg.prompt, cfg.verdict, special_tokens), nonce_key(cfg.prompt.fence_seed))
    labels = template_labels_from_config(cfg.verdict)
    if reward.mode == "pairwise_group":
        from nemo_genrm.modes.pairwise import PairwiseGroupMode, pairwise_template

        template = pairwise_template(reward.pairwise_group.template, labels)
        panel = Panel(choice_reader(cfg), votes=reward.votes, members=members)
        return PairwiseGroupMode(reward.pairwise_group, template, panel, presenter)
    if reward.mode == "rubric":
        from nemo_genrm.modes.rubric import RubricMode, rubric_template

        template = rubric_template(reward.rubric.template, labels)
        return RubricMode(reward.rubric, template, binary, presenter)
    from nemo_genrm.modes.reference import ReferenceMode

    return ReferenceMode(
        builder,
        binary,
        swap=reward.swap,
        dedup=reward.dedup,
        probability=reward.kind == "probability",
        verifier=reward.verifier,
    )
