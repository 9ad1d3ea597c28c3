"""A GRPO group: the key that names its prompt, whatever the framework passes, and its size.

A pairwise group is the responses to ONE prompt. What a framework sends with each response to
tell its prompt varies, and a bare number is not enough: verl's preprocessing numbers the rows of
every data file from 0 (``extra_info.index``), so two files (or a training and a validation
file) share every index; a dataset's ``uid: 9`` and another's ``index: 9`` are the same 9; a
NeMo Gym ``group_id`` may be a task number. So a group's key is a fingerprint of all that names
its prompt, each part optional:

- the data source (``metadata["data_source"]``: verl's row field, or a caller's own);
- the framework's group tag (``metadata[reward.pairwise_group.group_key]``, with the field it came
  from when that matters, e.g. ``("index", 9)``), never a bare number on its own;
- the prompt itself: ``metadata["genrm_prompt"]`` when the caller knows the prompt the policy saw
  (verl's prompt token ids, TRL's prompt messages, Gym's request input), else the conversation
  of the message log before its first assistant message (NeMo-RL's chat-templated prompt);

and the question shown to the judge. :func:`group_key` computes it and :func:`sample_keys` applies
it to a call's samples (those that can be placed in a group at all); the environment calls it for
every sample it gathers or ranks (:mod:`nemo_genrm.env.intake`), the pairwise mode for samples
handed to it without groups, and the drop-ins only put their framework's parts into the metadata,
so every framework's path keys groups one way. :class:`GroupTag` is the group a sample was placed
in, as the mode reads it.

A group's size is ``reward.pairwise_group.group_size``; :func:`group_size_problems` says when
that cannot be the trainer's (the driver's ``grpo.num_generations_per_prompt``), or when a
framework that sends responses one by one leaves it unset.

A caller whose tag names one group and never another (verl's ``uid``, drawn afresh for every
prompt of every step and validation batch; a TRL call's own runs) says so with
``metadata["genrm_group_unique"] = True``: responses of that key past its group's size (verl's
padding copies) or after it was settled are never gathered into a group of their own, and no
debt of that key outlives its group (see :mod:`nemo_genrm.env.gather`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from nemo_genrm.samples.types import BAD_INPUT, NO_ANSWER

if TYPE_CHECKING:
    from nemo_genrm.config import RewardConfig
    from nemo_genrm.samples.inputs import PreparedSample

GROUP_SIZE_SETTING = "reward.pairwise_group.group_size"
"""Where a GRPO group's size is set (under ``env.genrm``)."""

SOURCE_FIELD = "data_source"
"""Metadata field holding the sample's data source (verl's ``data_source``)."""

PROMPT_FIELD = "genrm_prompt"
"""Metadata field holding the prompt the policy saw (any JSON value), when the caller knows it."""

UNIQUE_FIELD = "genrm_group_unique"
"""Metadata field: ``True`` when the group tag names one group only (see the module docstring)."""


class GroupKey(NamedTuple):
    """What names a sample's group.

    Attributes:
        identity: Fingerprint of the data source, the group tag and the prompt.
        question: The question shown to the judge (the pairwise mode shows it with each pair).
        unique: The tag names one group only: its key is never gathered twice.
    """

    identity: str
    question: str
    unique: bool = False


def fingerprint(value: Any) -> str:
    """A stable hex digest of a JSON-like value (anything else by its ``repr``)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def prompt_messages(log: Any) -> list[list[Any]] | None:
    """The conversation before the log's first assistant message, as ``[role, content]`` pairs.

    The first assistant turn, not the last: every rollout of a prompt shares what came before it,
    while a multi-turn rollout's later turns differ. ``None`` when the log is not a list of messages.
    """
    if not isinstance(log, Sequence) or isinstance(log, (str, bytes)):
        return None
    prompt: list[list[Any]] = []
    for message in log:
        if not isinstance(message, Mapping):
            return None
        if message.get("role") == "assistant":
            break
        prompt.append([message.get("role"), message.get("content")])
    return prompt


def _tag(meta: Mapping[str, Any], field: str) -> Any:
    """The caller's group tag: a string, an integer, or a list/tuple of them (``("index", 9)``)."""
    tag = meta.get(field)
    if isinstance(tag, bool):
        return None
    if isinstance(tag, (str, int)):
        return tag
    if isinstance(tag, (list, tuple)) and all(isinstance(t, (str, int)) and not isinstance(t, bool) for t in tag):
        return list(tag)
    return None


def group_key(meta: Any, log: Any, question: str, tag_field: str) -> GroupKey:
    """The key of a sample's group (see the module docstring).

    Args:
        meta: The sample's metadata (a non-mapping counts as empty).
        log: The sample's message log (its prompt, when ``meta`` names none).
        question: The question the judge is shown for the sample.
        tag_field: ``reward.pairwise_group.group_key``.

    Returns:
        The key; two samples share it exactly when they share data source, tag and prompt.
    """
    meta = meta if isinstance(meta, Mapping) else {}
    source = meta.get(SOURCE_FIELD)
    prompt = meta[PROMPT_FIELD] if meta.get(PROMPT_FIELD) is not None else prompt_messages(log)
    parts = {
        "source": source if isinstance(source, (str, int)) and not isinstance(source, bool) else None,
        "tag": _tag(meta, tag_field),
        "prompt": prompt,
        "question": question,
    }
    return GroupKey(fingerprint(parts), question, meta.get(UNIQUE_FIELD) is True)


def placeable(sample: PreparedSample) -> bool:
    """Whether a sample arrives in a group at all.

    A response without an answer still arrived in its group, and so did a response whose content
    is not text (``bad_input`` with its question read); other decided samples (no response, no
    readable metadata) cannot be placed in one.
    """
    return sample.reason in (None, NO_ANSWER) or (sample.reason == BAD_INPUT and bool(sample.question))


def sample_keys(
    samples: Sequence[PreparedSample], metas: Sequence[Any], logs: Sequence[Any] | None, tag_field: str
) -> list[GroupKey | None]:
    """Per sample, the key of its group (:func:`group_key`); ``None`` where it cannot be placed in one.

    Args:
        samples: The prepared samples of a call.
        metas: Their metadata.
        logs: Their message logs (each names its prompt), or ``None`` where only the metadata does.
        tag_field: ``reward.pairwise_group.group_key``.
    """
    logs = logs if logs is not None else [None] * len(samples)
    return [
        group_key(meta, log, sample.question, tag_field) if placeable(sample) else None
        for sample, meta, log in zip(samples, metas, logs, strict=True)
    ]


@dataclass(frozen=True)
class GroupTag:
    """The group a sample was placed in, as the environment gathered it.

    Attributes:
        id: Tells groups apart within one judge call (two groups may share a key).
        key: The group's key (:func:`group_key`); its question is shown, and it seeds the draw of
            opponents.
        whole: The group is ranked; ``False``: it was short (when its wait ended, or in a call
            that holds every response it will get), so every response of it is masked.
        arrived: Responses of the group that came (empty ones included).
        late: It came after its group was settled, or past its group's size.
    """

    id: Hashable
    key: GroupKey
    whole: bool = True
    arrived: int = 0
    late: bool = False


def call_tags(keys: Sequence[GroupKey | None], scope: Hashable, size: int | None = None) -> list[GroupTag | None]:
    """Tags for groups that are what one call holds: every response of each of its groups.

    Args:
        keys: Per sample of the call, its group key (``None``: in no group).
        scope: Keeps the groups of two calls apart (the call).
        size: ``reward.pairwise_group.group_size``, or ``None``: each key's responses are its
            group, ranked as they are. With a size, a group of exactly ``size`` responses is
            ranked; a smaller one is short (masked in full: the rest will never come); responses
            past ``size`` are late (masked), the first ``size`` ranked.
    """
    counts = Counter(k for k in keys if k is not None)
    seen: Counter[GroupKey] = Counter()
    tags: list[GroupTag | None] = []
    for key in keys:
        if key is None:
            tags.append(None)
            continue
        seen[key] += 1
        arrived = counts[key] if size is None else min(counts[key], size)
        whole = size is None or counts[key] >= size
        late = size is not None and seen[key] > size
        tags.append(GroupTag(id=(scope, key), key=key, whole=whole and not late, arrived=arrived, late=late))
    return tags


def group_size_problems(
    reward: RewardConfig,
    *,
    per_prompt: int | None = None,
    per_prompt_setting: str = "",
    one_by_one: str | None = None,
    prefix: str = "env.genrm.",
) -> list[str]:
    """Why the pairwise groups could not be the trainer's GRPO groups (empty when they can).

    Only ``reward.mode: pairwise_group`` ranks within groups; any other mode has no problem here.

    Args:
        reward: The validated ``reward`` section.
        per_prompt: Responses the trainer draws per prompt, when known at config time.
        per_prompt_setting: The setting that gave ``per_prompt`` (``grpo.num_generations_per_prompt``).
        one_by_one: The framework's name when it sends the responses one by one (verl, NeMo Gym):
            the groups must then be gathered, which needs the size.
        prefix: Where the ``reward`` section sits, for the messages.

    Returns:
        One line per problem, naming both settings and the fix.
    """
    if reward.mode != "pairwise_group":
        return []
    size, setting = reward.pairwise_group.group_size, prefix + GROUP_SIZE_SETTING
    problems = []
    if one_by_one is not None and size is None:
        problems.append(
            f"reward.mode pairwise_group: {one_by_one} sends the responses one by one, so set {setting} to "
            "the number of responses per prompt (a judge call then waits for each group, by its key, up "
            "to group_wait_ms)"
        )
    if per_prompt is not None and size is not None and size != per_prompt:
        problems.append(
            f"{setting} ({size}) must equal {per_prompt_setting} ({per_prompt}): reward.mode pairwise_group "
            f"ranks the responses to one prompt against each other, and a group of another size is never "
            f"whole, so its responses would be masked (incomplete_group); set {setting}={per_prompt}, or "
            "leave it unset (null) when every response of a prompt arrives in one step call"
        )
    return problems
