"""Whether the judge's context holds its prompt: refused at start-up, said once when a step shows it.

A judge whose ``max_model_len`` cannot hold the template's own text leaves no room for the
question, the reference and the answer: every sample would come back ``too_long`` with reward
0, step after step, and training would run on nothing. :func:`check_answer_room` takes the
prompt the environment's mode would send with every field empty
(:meth:`~nemo_genrm.modes.base.Mode.fixed_request`, fences included), counts it with each
judge's tokenizer (:func:`judge_tokenizers`, loaded before any worker starts), and raises one
:class:`~nemo_genrm.errors.ConfigError` naming the numbers when fewer than
``prompt.min_answer_tokens`` are left. :class:`TooLongWatch` warns
once, with the fix, when a judge call nevertheless finds every sample ``too_long`` (prompts the
judge refused; an over-long answer is cut to ``prompt.answer.max_chars``, never refused).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from nemo_genrm.config import ConfigError, GenRMConfig, JudgeConfig
from nemo_genrm.env.support import judge_tokenizer
from nemo_genrm.judges.base import Judge, JudgeRequest
from nemo_genrm.judges.fitting import load_tokenizer, prompt_tokens
from nemo_genrm.samples.inputs import PreparedSample
from nemo_genrm.samples.metrics import StepTally
from nemo_genrm.samples.types import TOO_LONG

logger = logging.getLogger(__name__)

__all__ = ["TooLongWatch", "check_answer_room", "judge_configs", "judge_tokenizers"]


def judge_configs(cfg: GenRMConfig) -> list[tuple[str, JudgeConfig]]:
    """Every voting judge's config with where it sits: ``judge``, then ``reward.judges[i]``."""
    return [("judge", cfg.judge)] + [(f"reward.judges[{i}]", j) for i, j in enumerate(cfg.reward.judges)]


def judge_tokenizers(cfg: GenRMConfig, judges: Sequence[Judge | None] = ()) -> list[Any]:
    """Every voting judge's tokenizer, in the order of :func:`judge_configs`, before any worker starts.

    A ready judge's own; else loaded from its config (the tokenizer its engine will load);
    ``None`` for a judge reached over HTTP without ``judge.tokenizer``.

    Args:
        cfg: The environment's config.
        judges: Ready judges handed to the environment, in the order ``judge``,
            ``reward.judges`` (``None`` or missing: loaded from the config).

    Raises:
        ConfigError: A tokenizer that cannot load, naming the setting to change.
    """
    out = []
    for index, (where, config) in enumerate(judge_configs(cfg)):
        judge = judges[index] if index < len(judges) else None
        if judge is not None:
            out.append(judge_tokenizer(judge))
        elif config.backend == "http" and not config.tokenizer:
            out.append(None)
        else:
            setting = f"{where}.tokenizer" if config.tokenizer else f"{where}.model_name"
            out.append(load_tokenizer(config.tokenizer_name, setting=setting))
    return out


def check_answer_room(cfg: GenRMConfig, fixed: JudgeRequest, tokenizers: Sequence[Any]) -> None:
    """Refuse a judge whose context leaves fewer than ``prompt.min_answer_tokens`` for the fields.

    Args:
        cfg: The environment's config.
        fixed: The mode's judge prompt with every field empty (:meth:`Mode.fixed_request`).
        tokenizers: Per voting judge (:func:`judge_tokenizers`), its tokenizer; ``None``: not checked.

    Raises:
        ConfigError: Every judge whose context is too small, with its numbers and the fix.
    """
    minimum = cfg.prompt.min_answer_tokens
    problems = []
    for (where, config), tokenizer in zip(judge_configs(cfg), tokenizers, strict=True):
        if tokenizer is None:
            logger.debug("%s has no local tokenizer: its prompt room is not checked at start-up", where)
            continue
        fixed_tokens = prompt_tokens(fixed, tokenizer)
        new_tokens = config.sampling.max_new_tokens
        room = config.max_model_len - new_tokens - fixed_tokens
        if room < minimum:
            problems.append(
                f"{where}: the judge prompt ({_template(cfg)}) takes {fixed_tokens} tokens with question, "
                f"reference and answer empty; max_model_len {config.max_model_len} minus "
                f"sampling.max_new_tokens {new_tokens} leaves {room} for them, fewer than "
                f"prompt.min_answer_tokens ({minimum}), so every sample would be too_long. Raise "
                f"{where}.max_model_len to at least {fixed_tokens + new_tokens + minimum} (the engine's "
                "context must hold it), lower sampling.max_new_tokens, or choose a shorter "
                "template (consistency_compact)"
            )
    if problems:
        raise ConfigError(problems)


def _template(cfg: GenRMConfig) -> str:
    mode = cfg.reward.mode
    if mode == "pairwise_group":
        return f"reward.pairwise_group.template {cfg.reward.pairwise_group.template!r}"
    if mode == "rubric":
        return f"reward.rubric.template {cfg.reward.rubric.template!r}"
    return f"prompt.template {cfg.prompt.template!r}"


class TooLongWatch:
    """Warns once when a judge call finds every one of its samples ``too_long``.

    Args:
        cfg: The environment's config (for the numbers in the message).
    """

    def __init__(self, cfg: GenRMConfig):
        self.cfg = cfg
        self.warned = False

    def observe(self, tally: StepTally, samples: Sequence[PreparedSample]) -> None:
        """Look at one judge call's tally.

        Args:
            tally: The call's counts.
            samples: Its prepared samples (an answer is never ``too_long`` before the judge: its
                prompt did not fit the judge's context).
        """
        if self.warned or tally.samples == 0 or tally.counts.get(TOO_LONG, 0) < tally.samples:
            return
        self.warned = True
        judge = self.cfg.judge
        logger.warning(
            "every sample of this step (%d) was too_long and got reward 0: %d judge prompt(s) longer than "
            "judge.max_model_len (%d) minus sampling.max_new_tokens (%d) even with the answer shortened: raise "
            "judge.max_model_len (the engine's context must hold it) or choose a shorter prompt template. Said once.",
            tally.samples,
            tally.samples,
            judge.max_model_len,
            judge.sampling.max_new_tokens,
        )
