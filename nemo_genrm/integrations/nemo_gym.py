"""A NeMo Gym resources server whose ``/verify`` is this package's judge.

:class:`GenRMResourcesServer` is a ``SimpleResourcesServer`` (NeMo Gym 0.7): Gym's agents post
the policy's Responses-API output with the task's ``expected_answer`` to ``/verify``, and the
server answers with ``reward`` and Gym's failure fields. The judge is any engine of this package
(``dtensor``, ``vllm``, or ``http`` for the judge service of :mod:`nemo_genrm.serve`), built
from the ``genrm`` key of the server's Gym config (the ``env.genrm`` section) or from the YAML
file named by ``genrm_config_path``.

A failed judge is not a wrong answer: a reply with no verdict (``judge_unparseable``), an
engine failure (``judge_failed``) and a task with no reference (``verifier_error``) come back
with ``mask_sample: true``, as does every sample the environment masks (``incomplete_group``:
``genrm:incomplete_group``). An answer that cannot be judged (none found, a hedge, or a prompt
past the judge's context) is the policy's doing: reward 0, not masked, ``failure_kind``
``genrm:no_answer``, ``genrm:hedged`` or ``genrm:too_long``; an output without an assistant message (reasoning or a tool call alone) has
no answer. A request the judge cannot read is ``bad_input``: reward 0, not masked,
``failure_kind`` ``genrm:bad_input``, what was wrong in ``genrm_why`` and ``failure_reason`` (an
assistant message holding no text part, a malformed rubric). The response's and the question's
content parts are read as their text (``output_text``, ``input_text``, ``text``; images and
other parts left out). A judge gone for good (:class:`~nemo_genrm.errors.JudgeUnavailableError`)
is raised as Gym's ``JudgeError``, which Gym's ``judge_failsafe`` turns into a masked
``judge_failed`` row whose ``failure_reason`` names the error (routed to Gym's failures file).

Per mode, a request carries: ``expected_answer`` (reference mode), ``group_id`` (pairwise: the
rollouts of one task share it; a group is the rollouts with one ``group_id`` and one request
input; ``reward.pairwise_group.group_size`` must be set, since Gym posts one ``/verify`` per
rollout), ``rubric`` (rubric mode: the task's items, else
``reward.rubric.file``; a value that is not a list of criteria is ``bad_input``
(``bad_rubric``): reward 0, not masked, never judged). The server declares ``ray_enabled = False``: Gym starts no Ray cluster
for it; an in-process judge engine (``dtensor``, ``vllm``) connects to Gym's cluster, or starts
one, when the server is built.

Out of tree: a Gym config folder needs only an ``app.py`` that runs :func:`main` (see
docs/integrations.md); ``python -m nemo_genrm.integrations.nemo_gym`` does the same.

Importing this module imports NeMo Gym; nothing else in the package does.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.judge import JudgeError
from pydantic import Field, PrivateAttr

from nemo_genrm.errors import JudgeUnavailableError
from nemo_genrm.integrations.judge_reward import Judgement, JudgeReward, genrm_section, rubric_items
from nemo_genrm.samples.groups import PROMPT_FIELD
from nemo_genrm.samples.types import (
    BAD_INPUT,
    HEDGED,
    INCOMPLETE_GROUP,
    JUDGE_ERROR,
    MISSING_GROUND_TRUTH,
    MISSING_RUBRIC,
    NO_ANSWER,
    PARSE_FAILURE,
    TOO_LONG,
)

logger = logging.getLogger(__name__)

__all__ = ["GenRMResourcesServer", "GenRMResourcesServerConfig", "GenRMVerifyRequest", "GenRMVerifyResponse", "main"]

# reason -> (failure_kind, mask_sample, failure_reason); ``judged`` has none.
_FAILURES: dict[str, tuple[str, bool, str]] = {
    PARSE_FAILURE: ("judge_unparseable", True, "the judge replied without a verdict"),
    JUDGE_ERROR: ("judge_failed", True, "the judge engine failed"),
    MISSING_GROUND_TRUTH: ("verifier_error", True, "the task has no expected_answer"),
    NO_ANSWER: ("genrm:no_answer", False, "the response holds no answer to judge"),
    TOO_LONG: ("genrm:too_long", False, "the answer is past the length cap, or its prompt does not fit the judge"),
    HEDGED: ("genrm:hedged", False, "the response states more distinct final values than the reference holds"),
    INCOMPLETE_GROUP: ("genrm:incomplete_group", True, "no other response of its group was judged with it"),
    MISSING_RUBRIC: ("verifier_error", True, "the task has no rubric items"),
    BAD_INPUT: ("genrm:bad_input", False, "the request cannot be judged as sent"),
}


class GenRMResourcesServerConfig(BaseResourcesServerConfig):
    """The server's Gym config: Gym's own keys plus the judge's.

    Attributes:
        genrm: The ``env.genrm`` section (judge, prompt, verdict, reward, ...).
        genrm_config_path: A YAML file with the section instead (``env.genrm`` inside, or the
            section alone); used when ``genrm`` is not set.
    """

    genrm: dict[str, Any] | None = None
    genrm_config_path: str | None = None


class GenRMVerifyRequest(BaseVerifyRequest):
    """A verify request: Gym's fields plus what the reward mode reads (and, optionally, the question)."""

    expected_answer: str | None = None
    question: str | None = Field(None, description="The raw question; else the last user message of the input.")
    group_id: str | int | None = Field(
        None, description="pairwise_group: the group of the rollout (the rollouts of one task share it)."
    )
    # Any JSON value: a rubric that is not a list of criteria is the task's fault, answered as
    # bad_input (reward 0, counted, never judged) rather than refused with HTTP 422.
    rubric: Any = Field(None, description="rubric: the task's items (a list of strings or {criterion, weight}).")


class GenRMVerifyResponse(BaseVerifyResponse):
    """The verify response: Gym's fields plus the judge's own."""

    expected_answer: str | None = None
    verdict: int | None = None
    genrm_reason: str
    genrm_why: str | None = Field(None, description="The reason's detail: what was wrong for bad_input.")
    extracted_answer: str | None = None


def response_content(body: BaseVerifyRequest) -> Any:
    """The content of the response's last assistant message, as JSON (a string or content parts,
    read by the environment); ``""`` when the output has none (reasoning or tool calls alone)."""
    output = body.response.model_dump(mode="json").get("output") or []
    for item in reversed(output):
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "assistant":
            return item.get("content")
    return ""


def question_content(body: BaseVerifyRequest) -> Any:
    """The content of the request input's last user message, as JSON (a plain string input is the
    question); ``None`` when it has none."""
    given = body.responses_create_params.model_dump(mode="json").get("input")
    if isinstance(given, str):
        return given
    for message in reversed(given if isinstance(given, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            return message.get("content")
    return None


def failure_fields(judgement: Judgement) -> dict[str, Any]:
    """``reward``, ``mask_sample``, ``failure_kind`` and ``failure_reason`` for one judgement."""
    kind, masked, reason = _FAILURES.get(judgement.reason, (None, False, None))
    masked = masked or judgement.masked  # every sample the environment masks
    if judgement.reason == BAD_INPUT and judgement.why is not None:
        reason = f"{reason}: {judgement.why}"
    return {"reward": judgement.reward, "mask_sample": masked, "failure_kind": kind, "failure_reason": reason}


def mode_extras(reward: JudgeReward, body: GenRMVerifyRequest) -> dict[str, Any] | None:
    """The request's metadata for the reward mode: its group, or its rubric items."""
    cfg = reward.config.reward
    if cfg.mode == "pairwise_group":
        # The group is its group_id and the prompt the policy saw (samples/groups.py): a
        # group_id numbered per batch or per file never joins two prompts' rollouts.
        prompt = body.responses_create_params.model_dump(mode="json").get("input")
        return {cfg.pairwise_group.group_key: body.group_id, PROMPT_FIELD: prompt}
    if cfg.mode == "rubric" and body.rubric is not None:
        return {cfg.rubric.items_key: rubric_items(body.rubric)}
    return None


class GenRMResourcesServer(SimpleResourcesServer):
    """NeMo Gym resources server that verifies with this package's judge (see the module docstring).

    Example:
        Not run as a doctest: the server takes its judge from its Gym config only (no judge
        object is passed in) and is built by Gym's ``run_webserver`` with Gym's server client,
        so an example needs Gym's server machinery and a judge server;
        tests/dropins/test_nemo_gym_server.py posts such requests to the real app. A hedge
        posted to ``/verify`` (Responses-API fields shortened to ``...``)::

            POST /verify
            {"responses_create_params": {"input": [{"role": "user", "content": "What is 6 times 7?"}]},
             "response": {"output": [{"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": "Answer: 41 or 42"}], ...}],
                          ...},
             "expected_answer": "42"}

        is answered, with the request's fields, as the policy's fault (reward 0, not masked)::

            {"responses_create_params": ..., "response": ..., "expected_answer": "42",
             "reward": 0.0, "mask_sample": false, "failure_kind": "genrm:hedged",
             "failure_reason": "the response states more distinct final values than the reference holds",
             "verdict": null, "genrm_reason": "hedged", "genrm_why": null, "extracted_answer": null}

        ``Answer: 42`` gets ``"reward": 1.0, "verdict": 1, "genrm_reason": "judged",
        "failure_kind": null, "extracted_answer": "42"``; a judge that fails gets
        ``"mask_sample": true`` (``judge_unparseable``, ``judge_failed``).
    """

    config: GenRMResourcesServerConfig
    # Gym starts no Ray cluster for this server: an HTTP judge needs none, and an in-process
    # engine connects to (or starts) one when the server is built.
    ray_enabled: ClassVar[bool | None] = False
    _reward: JudgeReward | None = PrivateAttr(None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # Built after pydantic's validation, so a ConfigError reaches the caller as itself.
        cfg = self.config
        if cfg.genrm is None and cfg.genrm_config_path is None:
            raise ValueError(f"resources server {cfg.name!r}: set genrm (the env.genrm section) or genrm_config_path")
        section = genrm_section(cfg.genrm if cfg.genrm is not None else cfg.genrm_config_path)
        judge = section.get("judge") if isinstance(section, dict) else None
        if not (isinstance(judge, dict) and judge.get("backend") == "http"):
            _connect_ray()
        self._reward = JudgeReward(section, per_sample="NeMo Gym")

    async def verify(self, body: GenRMVerifyRequest) -> GenRMVerifyResponse:
        """Judge the response as the reward mode asks; concurrent requests share judge batches.

        Raises:
            JudgeError: The judge is gone for good (Gym's failsafe masks the row as
                ``judge_failed``, its ``failure_reason`` naming :class:`JudgeUnavailableError`).
        """
        question = body.question or question_content(body)
        extras = mode_extras(self._reward, body)
        try:
            (judgement,) = await self._reward.ajudge(
                [response_content(body)], [body.expected_answer], [question], [extras]
            )
        except JudgeUnavailableError as exc:
            raise JudgeError(f"JudgeUnavailableError: {exc}") from exc
        return GenRMVerifyResponse(
            **body.model_dump(exclude={"expected_answer", "question", "group_id", "rubric"}),
            **failure_fields(judgement),
            expected_answer=body.expected_answer,
            verdict=judgement.verdict,
            genrm_reason=judgement.reason,
            genrm_why=judgement.why,
            extracted_answer=judgement.answer,
        )

    def shutdown_judge(self) -> None:
        """Free the judge engine; safe to call twice."""
        if self._reward is not None:
            self._reward.close()


def _connect_ray() -> None:
    """Join Gym's Ray cluster (or start one, as Gym would) for an in-process judge engine."""
    import ray

    if ray.is_initialized():
        return
    from nemo_gym.server_utils import initialize_ray

    initialize_ray()


def main() -> None:
    """Run the server the way NeMo Gym starts a resources server (its global config names it)."""
    GenRMResourcesServer.run_webserver()


if __name__ == "__main__":
    main()
