"""The key that names a GRPO group: one prompt, whatever the framework passes with its responses.

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

and the question shown to the judge. :func:`group_key` computes it; the environment calls it
for every sample it gathers or ranks (:mod:`nemo_genrm.env.intake`), and the drop-ins only put
their framework's parts into the metadata, so every framework's path keys groups one way.

A caller whose tag names one group and never another (verl's ``uid``, drawn afresh for every
prompt of every step and validation batch; a TRL call's own runs) says so with
``metadata["genrm_group_unique"] = True``: responses of that key past its group's size (verl's
padding copies) or after it was settled are never gathered into a group of their own, and no
debt of that key outlives its group (see :mod:`nemo_genrm.env.gather`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

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
