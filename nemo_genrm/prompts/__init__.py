"""What a judge is asked: templates, the answer cut out of a response, and the fenced candidate.

- :mod:`~nemo_genrm.prompts.extraction`: the answer the judge is shown (every final-answer
  statement found, hedges refused, the final one with its context), reading the response as it
  renders (:mod:`~nemo_genrm.prompts.reading`) and comparing stated values as values
  (:mod:`~nemo_genrm.prompts.values`);
- :mod:`~nemo_genrm.prompts.builder`: built-in and custom templates (labels filled from the
  verdict config) and :class:`PromptBuilder`, which neutralises and fences the candidate
  (:mod:`nemo_genrm.guard.injection`) and returns a :class:`JudgePrompt`;
- :mod:`~nemo_genrm.prompts.request`: :class:`JudgeRequest`, one conversation and where the
  candidate sits in it, which the engines (:mod:`nemo_genrm.judges`) read.

How the reply is read is :mod:`nemo_genrm.verdicts`.
"""

from __future__ import annotations

from nemo_genrm.prompts.builder import (
    BUILTIN_TEMPLATES,
    DEFAULT_LABELS,
    JudgePrompt,
    JudgeTemplate,
    PromptBuilder,
    defuse_tokens,
    load_template,
    neutralise,
    template_labels_from_config,
)
from nemo_genrm.prompts.extraction import ExtractedAnswer, extract_answer, last_boxed
from nemo_genrm.prompts.request import JudgeRequest, Message, RequestLike

__all__ = [
    "BUILTIN_TEMPLATES",
    "DEFAULT_LABELS",
    "ExtractedAnswer",
    "JudgePrompt",
    "JudgeRequest",
    "JudgeTemplate",
    "Message",
    "PromptBuilder",
    "RequestLike",
    "defuse_tokens",
    "extract_answer",
    "last_boxed",
    "load_template",
    "neutralise",
    "template_labels_from_config",
]
