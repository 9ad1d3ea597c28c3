"""A judge reward for TRL's ``GRPOTrainer(reward_funcs=[...])``.

TRL (1.16) calls each reward function with ``prompts``, ``completions`` and ``completion_ids``
(one entry per completion), every dataset column other than ``prompt`` as a list of the same
length, and its own keyword arguments (``trainer_state``, ``log_extra``, ``log_metric``, and
``environments`` when set). An ``async`` ``__call__`` is awaited on the trainer's event loop,
next to its other async reward functions. A ``None`` reward becomes NaN: a completion that every
reward function left ``None`` is kept out of its group's baseline and gets advantage 0 (TRL
warns about it); next to other reward functions a ``None`` adds nothing to the sum.

:class:`GenRMReward` returns the judge's reward per completion, or ``None`` where the judge
failed (no verdict in its reply, or the engine failed) or the environment masked the sample
(``incomplete_group``): a broken judge is not a wrong answer. An answer that cannot be judged
(empty, past the length cap, no reference) gets 0.0, as in every other entry point of this
package; one the environment cannot read (a completion whose content holds no text part, e.g. an
image alone) gets 0.0 as ``bad_input``, its detail logged in the ``<name>_why`` column. Completions
and chat prompts may hold OpenAI-style content parts, as TRL's ``prepare_multimodal_messages``
makes them for vision-language models: their text parts are what the judge reads. A judge gone for good raises :class:`~nemo_genrm.errors.JudgeUnavailableError` out of
the call, which stops ``trainer.train()``.

What each mode reads from TRL's batch (one call holds every completion of the step, in one
process; with several, each process's call holds its slice):

- ``reference``: the reference column (``reference_column``, required);
- ``pairwise_group``: no reference; a group is a run of consecutive completions of the same
  prompt (TRL repeats each prompt ``num_generations`` times in a row), cut into runs of
  ``reward.pairwise_group.group_size`` when set, else of TRL's ``num_generations`` (read from
  the trainer behind ``log_extra``), so two dataset rows with the same prompt next to each
  other stay two groups; or the values of ``group_column``. A group whose size differs from
  ``num_generations`` is warned about (``group_size`` or ``group_column`` that do not match
  TRL's layout, a run cut short). Each call holds every completion of its groups, so its groups
  are settled inside it (with ``group_size``: a group of that size is ranked, a smaller one
  masked at once, completions past it masked as late), never held and never owed by another
  call; the key of a group is its prompt and its place in that call
  (:mod:`nemo_genrm.samples.groups`). With
  several processes (accelerate) a group may span slices: the slices are sent to process 0,
  which alone builds a judge and judges the global batch, and each process keeps its own
  results; a failure on any process, before or in the judge call, is raised on every process
  (:mod:`nemo_genrm.integrations.processes`);
- ``rubric``: the items of each row from ``rubric_column`` (default
  ``reward.rubric.items_key``), else from ``reward.rubric.file``; a value that is not a list
  of criteria is ``bad_input`` (reward 0), never judged.

Nothing here imports TRL.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nemo_genrm.integrations.judge_reward import Judgement, JudgeReward, genrm_section, rubric_items
from nemo_genrm.integrations.processes import Processes, current_processes, launched_rank
from nemo_genrm.judges.base import Judge
from nemo_genrm.samples.groups import PROMPT_FIELD

logger = logging.getLogger(__name__)

__all__ = ["GenRMReward"]


def _question(prompt: Any) -> Any:
    """The question a prompt asks: the content (text or content parts) of a chat prompt's last
    user message, else of its last message, or the prompt text; the environment reads it."""
    if isinstance(prompt, Sequence) and not isinstance(prompt, str):
        messages = [m for m in prompt if isinstance(m, dict)]
        users = [m for m in messages if m.get("role") == "user"]
        last = users[-1] if users else messages[-1] if messages else {}
        return last.get("content")
    return prompt


def _tag(group: Any) -> Any:
    """A group value as a key part: an int or a string as it is, anything else by its ``repr``."""
    return group if isinstance(group, (int, str)) and not isinstance(group, bool) else repr(group)


def _prompt(prompt: Any) -> Any:
    """A prompt as a key part: text as it is, chat messages as ``[role, content]`` pairs."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return [[m.get("role"), m.get("content")] if isinstance(m, dict) else repr(m) for m in prompt]
    return repr(prompt)


def prompt_runs(prompts: Sequence[Any], size: int | None) -> list[int]:
    """A group number per completion: runs of consecutive equal prompts, cut every ``size``.

    TRL puts the ``num_generations`` completions of a prompt next to each other, so a run is a
    group, and two dataset rows with the same prompt in one batch stay apart when ``size``
    (``num_generations``) is known.
    """
    groups: list[int] = []
    previous, count, group = None, 0, -1
    for prompt in prompts:
        key = repr(prompt)
        if key != previous or (size is not None and count >= size):
            group, count, previous = group + 1, 0, key
        groups.append(group)
        count += 1
    return groups


def trl_num_generations(kwargs: dict[str, Any]) -> int | None:
    """TRL's completions per prompt for this call, read from the trainer that passed ``log_extra``
    (``num_generations`` while training, ``num_generations_eval`` while evaluating); ``None``
    when the caller is not a TRL trainer."""
    trainer = getattr(kwargs.get("log_extra"), "__self__", None)
    model = getattr(trainer, "model", None)
    name = "num_generations" if model is None or getattr(model, "training", True) else "num_generations_eval"
    value = getattr(trainer, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class _Published:
    """The judge's rewards of its recent calls, each a future found by the ``completions`` list
    TRL passes every reward function of one call (the same object), for :meth:`GenRMReward.masking`."""

    KEPT = 8

    def __init__(self) -> None:
        self._slots: list[tuple[Sequence[Any], asyncio.Future]] = []

    def slot(self, completions: Sequence[Any], *, judging: bool = False) -> asyncio.Future:
        """The future of this call's rewards (or its error), made by whichever side asks first.

        The judge (``judging``) takes a future still waiting, else a new one: a caller may pass
        the same list in a later call, whose rewards are new.
        """
        loop = asyncio.get_running_loop()
        for seen, future in self._slots:
            if seen is completions and future.get_loop() is loop and not (judging and future.done()):
                return future
        future = loop.create_future()
        self._slots = [*[s for s in self._slots if s[0] is not completions][-(self.KEPT - 1) :], (completions, future)]
        return future


class GenRMReward:
    """An async TRL reward function: the judge's verdict on each completion.

    Args:
        config: The ``env.genrm`` section, a whole run config, or a YAML path (see
            :func:`nemo_genrm.integrations.judge_reward.genrm_section`).
        reference_column: The dataset column holding the reference answer (reference mode).
        question_column: A dataset column holding the raw question; when ``None`` (or
            absent from the batch) the question is the prompt's last user message.
        judge: A ready judge to use instead of building one from ``config``.
        overrides: Overrides for a YAML ``config``.
        name: The name TRL logs this reward under (``rewards/<name>/mean``).
        rubric_column: Rubric mode: the column with each row's items (default:
            ``reward.rubric.items_key``).
        group_column: Pairwise mode: a column naming each completion's group, instead of runs
            of the same prompt.

    In ``pairwise_group`` mode with several processes only process 0 judges, so only it builds
    the judge (an in-process engine loads a whole judge model); every process validates the
    config, so a bad one fails on each of them at once.

    Raises:
        ConfigError: Every problem with the config, at once.

    Example:
        TRL awaits the reward with its batch; here a stand-in judge
        (:class:`~nemo_genrm.testing.literal.LiteralJudge`: ``1`` when the answer it is shown
        states the reference's value, else ``0``) replaces the engine, and the dataset's
        ``ground_truth`` column holds the references:

        >>> import asyncio
        >>> from nemo_genrm.integrations.trl import GenRMReward
        >>> from nemo_genrm.testing.literal import LiteralJudge
        >>> reward = GenRMReward({"judge": {"model_name": "stand-in"}}, judge=LiteralJudge())
        >>> prompts = [[{"role": "user", "content": "What is 6 times 7?"}]] * 3
        >>> completions = [[{"role": "assistant", "content": f"Answer: {a}"}] for a in ("42", "41", "41 or 42")]
        >>> asyncio.run(reward(prompts=prompts, completions=completions, ground_truth=["42"] * 3))
        [1.0, 0.0, 0.0]
        >>> reward.close()

        In training: ``GRPOTrainer(model, reward_funcs=[GenRMReward("genrm.yaml")], ...)``.
    """

    def __init__(
        self,
        config: Any,
        *,
        reference_column: str = "ground_truth",
        question_column: str | None = None,
        judge: Judge | None = None,
        overrides: Sequence[str] = (),
        name: str = "genrm",
        rubric_column: str | None = None,
        group_column: str | None = None,
    ) -> None:
        self.reference_column = reference_column
        self.question_column = question_column
        self.group_column = group_column
        self.__name__ = name  # TRL names a reward function by its __name__
        from nemo_genrm.config import GenRMConfig, validate

        self._section = genrm_section(config, overrides)  # a YAML file is read once, here
        self.config = validate(GenRMConfig, self._section, prefix="env.genrm")  # on every process
        self._judge = judge
        self._calls = itertools.count()  # tells one call's groups from another's
        self._published = _Published()  # each call's rewards, for the functions it masks
        self._warned_sizes: set[tuple[int, tuple[int, ...]]] = set()
        self._reward: JudgeReward | None = None
        if self.config.reward.mode != "pairwise_group" or launched_rank() in (None, 0):
            self._reward = JudgeReward(self._section, judge=judge)  # starts the judge: fails here, not mid-run
        self.rubric_column = rubric_column or self.config.reward.rubric.items_key

    @property
    def mode(self) -> str:
        """``reward.mode``: ``reference``, ``pairwise_group`` or ``rubric``."""
        return self.config.reward.mode

    def _judging(self) -> JudgeReward:
        """The judge reward, built here on first use where the constructor left it out."""
        if self._reward is None:
            self._reward = JudgeReward(self._section, judge=self._judge)
        return self._reward

    @classmethod
    def from_yaml(cls, path: str | Path, *overrides: str, **kwargs: Any) -> GenRMReward:
        """Build from a YAML file (``env.genrm`` inside, or the section alone) and overrides."""
        return cls(path, overrides=overrides, **kwargs)

    async def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """Judge every completion against its reference.

        Args:
            prompts: One prompt per completion (text, or chat messages).
            completions: The completions (text, or TRL's list of messages, whose last assistant
                message is the response; its content text or content parts).
            completion_ids: Token ids per completion (not used: the judge reads the text).
            **kwargs: The dataset's columns (the reference column is required) and TRL's own
                keyword arguments; ``log_metric`` and ``log_extra`` are used when given.

        Returns:
            One reward per completion; ``None`` where the judge failed or the sample is masked.

        Raises:
            KeyError: The batch lacks the column the mode needs (reference mode: the reference
                column; rubric mode without ``reward.rubric.file``: the rubric column).
            JudgeUnavailableError: The judge has been unreachable past
                ``fault_tolerance.unavailable_grace_s``.
        """
        published = self._published.slot(completions, judging=True)
        try:
            if self.mode == "pairwise_group" and (processes := current_processes()) is not None:
                judgements, metrics = self._judge_across(processes, prompts, completions, kwargs)
            else:
                reward = self._judging()
                judgements = await reward.ajudge(list(completions), *self._inputs(prompts, kwargs), whole_groups=True)
                metrics = reward.metrics()
        except BaseException as exc:
            published.set_result(exc)  # the reward functions it masks raise it too
            raise
        self._log(judgements, metrics, kwargs.get("log_metric"), kwargs.get("log_extra"))
        rewards = [j.reward_or_none for j in judgements]
        published.set_result(rewards)
        return rewards

    def masking(self, other: Callable[..., Any]) -> Callable[..., Any]:
        """``other`` as a TRL reward function that is ``None`` wherever this judge's reward is.

        TRL sums the reward functions of a completion with ``nansum``: a judge reward that is
        ``None`` (a failed judge, a masked sample) next to another function's value trains as
        a judge reward of 0. A completion every function left ``None`` is left out of its
        group's baseline and gets advantage 0 instead. Pass the other functions through this,
        beside the judge, and a judge failure masks the whole completion::

            judge = GenRMReward("genrm.yaml")
            GRPOTrainer(reward_funcs=[judge, judge.masking(format_reward)], ...)

        Args:
            other: A TRL reward function (sync or async); its name is kept.

        Returns:
            An async reward function; it waits for this judge's rewards of the same call, so
            this judge must be one of the trainer's ``reward_funcs`` (checked at the call).

        Raises:
            ValueError: (at the call) the trainer's ``reward_funcs`` do not include this judge.
        """
        judge = self

        async def masked(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any):
            trainer = getattr(kwargs.get("log_extra"), "__self__", None)
            funcs = getattr(trainer, "reward_funcs", None)
            if funcs is not None and not any(f is judge for f in funcs):
                raise ValueError(
                    f"{masked.__name__}: GenRMReward.masking needs its judge among the trainer's reward_funcs"
                )
            out = other(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
            if inspect.isawaitable(out):
                out = await out
            judged = await judge._published.slot(completions)
            if isinstance(judged, BaseException):
                raise judged
            return [None if j is None else r for r, j in zip(out, judged, strict=True)]

        masked.__name__ = getattr(other, "__name__", type(other).__name__)
        return masked

    def _inputs(self, prompts: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list | None, list, list | None]:
        """References, questions and per-sample metadata of the mode, from TRL's batch."""
        mode = self.mode
        references = None  # the other modes need none
        if mode == "reference":
            references = list(self._column(kwargs, self.reference_column, "the reference answer"))
        if self.question_column is not None and self.question_column in kwargs:
            # text, or content parts, as they are; a number as its text
            questions = [
                q if q is None or isinstance(q, (str, list, tuple)) else str(q) for q in kwargs[self.question_column]
            ]
        else:
            questions = [_question(p) for p in prompts]
        return references, questions, self._extras(mode, prompts, kwargs)

    def _judge_across(
        self, processes: Processes, prompts: Sequence[Any], completions: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[list[Judgement], dict[str, float]]:
        """Pairwise with several processes: judge the global batch on process 0, keep this slice.

        Each process holds a slice of the global batch and a group may span slices, so the
        slices go to process 0 (in process order, which is TRL's global order), which judges
        them in one call and hands every process its part of the results. The slice is prepared
        inside the exchange, so a completion this process cannot read is raised on every
        process instead of leaving them waiting for it. Nothing here awaits: the collectives run
        in one step of the event loop, so another reward function's collectives cannot come
        between them in one process and not in another.
        """
        columns = [c for c in (self.question_column, self.group_column) if c is not None and c in kwargs]

        def prepare() -> dict[str, Any]:
            texts = list(completions)  # as TRL passes them: the environment reads them
            return {"prompts": list(prompts), "texts": texts, "columns": {c: list(kwargs[c]) for c in columns}}

        def judge(slices: list[dict[str, Any]]) -> list[tuple[list[Judgement], dict[str, float]]]:
            reward = self._judging()
            whole = {c: [v for part in slices for v in part["columns"][c]] for c in columns}
            whole["log_extra"] = kwargs.get("log_extra")  # this process's trainer: num_generations
            everyone = [p for part in slices for p in part["prompts"]]
            texts = [t for part in slices for t in part["texts"]]
            judged = reward.judge(texts, *self._inputs(everyone, whole), whole_groups=True)  # the global batch
            metrics, shares, start = reward.metrics(), [], 0
            for part in slices:
                shares.append((judged[start : start + len(part["texts"])], metrics))
                start += len(part["texts"])
            return shares

        return processes.judge_on_first(prepare, judge)

    @staticmethod
    def _column(kwargs: dict[str, Any], column: str, what: str) -> Sequence[Any]:
        if column not in kwargs:
            columns = sorted(k for k in kwargs if k not in {"trainer_state", "log_extra", "log_metric", "environments"})
            raise KeyError(
                f"GenRMReward needs the dataset column {column!r} ({what}); the batch has {columns}. "
                "Name the column that holds it in GenRMReward's arguments."
            )
        return kwargs[column]

    def _extras(self, mode: str, prompts: Sequence[Any], kwargs: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Per completion, the metadata the mode reads: its group, or its rubric items."""
        reward_cfg = self.config.reward
        if mode == "pairwise_group":
            generations = trl_num_generations(kwargs)
            size = reward_cfg.pairwise_group.group_size or generations
            groups = list(kwargs[self.group_column]) if self.group_column in kwargs else prompt_runs(prompts, size)
            self._check_sizes(groups, generations)
            call = next(self._calls)
            return [
                {reward_cfg.pairwise_group.group_key: [call, _tag(group)], PROMPT_FIELD: _prompt(prompt)}
                for group, prompt in zip(groups, prompts, strict=True)
            ]
        if mode == "rubric":
            if self.rubric_column not in kwargs and reward_cfg.rubric.file:
                return None  # every row's items come from the rubric file
            items = self._column(kwargs, self.rubric_column, "the rubric items, or set reward.rubric.file")
            return [{reward_cfg.rubric.items_key: rubric_items(value)} for value in items]
        return None

    def _check_sizes(self, groups: Sequence[Any], generations: int | None) -> None:
        """Warn (once per layout) when a group's size differs from TRL's ``num_generations``."""
        if generations is None:
            return
        sizes = tuple(sorted({n for n in Counter(map(_tag, groups)).values() if n != generations}))
        if not sizes or (generations, sizes) in self._warned_sizes:
            return
        self._warned_sizes.add((generations, sizes))
        how = (
            f"the column {self.group_column!r}"
            if self.group_column is not None
            else (
                "reward.pairwise_group.group_size"
                if self.config.reward.pairwise_group.group_size
                else "runs of one prompt"
            )
        )
        logger.warning(
            "pairwise_group: TRL generates %d completions per prompt (num_generations) but %s made groups of %s: "
            "each group is ranked as formed; set reward.pairwise_group.group_size to num_generations (or leave it "
            "unset), or name a group_column whose groups match TRL's",
            generations,
            how,
            ", ".join(map(str, sizes)),
        )

    def _log(
        self,
        judgements: list[Judgement],
        metrics: dict[str, float],
        log_metric: Callable | None,
        log_extra: Callable | None,
    ) -> None:
        """Send the judge's metrics and each sample's reason to TRL's logs, when TRL offers them."""
        if log_metric is not None:
            for key, value in metrics.items():
                log_metric(key, float(value))
        if log_extra is not None:
            log_extra(f"{self.__name__}_reason", [j.reason for j in judgements])
            log_extra(f"{self.__name__}_why", [j.why for j in judgements])

    def close(self) -> None:
        """Free the judge this reward built, if it built one; safe to call twice."""
        if self._reward is not None:
            self._reward.close()
