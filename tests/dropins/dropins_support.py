"""Shared by the drop-in tests: a stand-in judge whose verdict is a known function of its prompt.

The verdict reads the judge prompt's user message: ``0`` when it holds ``WRONG``, an unparseable
reply when it holds ``CONFUSE``, an engine error when it holds ``CRASH``, and otherwise ``1``
when it holds ``RIGHT``, or the parity of its count of ``a`` characters (so a random tiny policy
gets rewards of both values). The tests compute the expected reward from the same rule.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from nemo_genrm.judges.base import Generation, JudgeRequest, RequestLike
from nemo_genrm.testing.stand_in_judges import StandInServer
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge

GENRM_SECTION: dict[str, Any] = {
    # The stand-in replaces the engine; the section still names one, as a user's config would.
    "judge": {"backend": "http", "model_name": "stand-in", "http": {"base_url": "http://127.0.0.1:9/v1"}},
    "resources": {"gpus_per_replica": 0},
    "coalesce": {"max_wait_ms": 0},
}


def user_text(request: RequestLike) -> str:
    """The last user message of a judge request."""
    messages = JudgeRequest.of(request).messages
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def verdict_text(prompt_text: str) -> str | None:
    """The stand-in's reply to a prompt whose user message is ``prompt_text`` (``None``: error)."""
    if "CRASH" in prompt_text:
        return None
    if "CONFUSE" in prompt_text:
        return "maybe"
    if "WRONG" in prompt_text:
        return "0"
    if "RIGHT" in prompt_text:
        return "1"
    return "1" if prompt_text.count("a") % 2 == 0 else "0"


class RuleJudge(GenerateOnlyJudge):
    """The stand-in judge of this module; records every prompt it was shown."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self._lock = threading.Lock()

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        texts = [user_text(item) for item in batch]
        with self._lock:
            self.prompts.extend(texts)
        replies = [verdict_text(text) for text in texts]
        return [
            Generation(reply) if reply is not None else Generation(None, error="stand_in_crash") for reply in replies
        ]


class RuleServer(StandInServer):
    """An OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 replying by the rule.

    It plays the judge service (or verl's reward model router) for the HTTP engine: the reply to
    each request is :func:`verdict_text` of its last user message (a 500 where that is an error).
    Use as a context manager; ``address`` is ``host:port`` and ``base_url`` ends in ``/v1``.
    """

    def __init__(self) -> None:
        super().__init__(lambda body: verdict_text(self.user_text(body)))

    @property
    def prompts(self) -> list[str]:
        """The last user message of every request received."""
        return [self.user_text(body) for body in self.bodies]

    @property
    def models(self) -> list[str | None]:
        """The model named by every request received."""
        return [body.get("model") for body in self.bodies]


def http_section(base_url: str | None, **judge: Any) -> dict[str, Any]:
    """An ``env.genrm`` section whose judge is the HTTP engine at ``base_url``."""
    http = {"base_url": base_url, "max_retries": 0, "timeout_s": 10}
    return {
        "judge": {"backend": "http", "model_name": "judge", "http": http, **judge},
        "resources": {"gpus_per_replica": 0},
    }


def count_judge_builds() -> list[object]:
    """Record every JudgeReward the TRL drop-in builds from now on (in this process).

    Returns:
        The list each built JudgeReward is appended to.
    """
    from nemo_genrm.integrations import trl as trl_dropin

    built: list[object] = []
    base = trl_dropin.JudgeReward

    class Counted(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    trl_dropin.JudgeReward = Counted
    return built
