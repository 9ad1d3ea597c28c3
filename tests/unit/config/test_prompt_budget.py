"""The judge's prompt budget has one home: ``JudgeConfig.max_prompt_tokens``.

``max_model_len`` minus the reply's tokens (``sampling.max_new_tokens``, plus
``sampling.reasoning.verdict_tokens`` for a reasoning judge). Every reader of the budget (the
engines' fitting, the HTTP engine, the start-up check, the verdict reader, the judge service,
RewardBench) takes it from there; a test walks the package's source so a second subtraction
cannot come back unnoticed.
"""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import nemo_genrm
from nemo_genrm.config import JudgeConfig
from nemo_genrm.errors import ENGINE_ERROR, PROMPT_TOO_LONG
from nemo_genrm.judges.base import Generation, JudgeRequest
from nemo_genrm.modes.base import Reader, read_replies
from nemo_genrm.samples.types import PARSE_FAILURE
from nemo_genrm.verdicts import TRUNCATED, VerdictParser

PACKAGE = Path(nemo_genrm.__file__).parent
HOME = PACKAGE / "config" / "judge.py"


def _judge(max_model_len: int = 256, **sampling) -> JudgeConfig:
    return JudgeConfig.model_validate({"model_name": "m", "max_model_len": max_model_len, "sampling": sampling})


@pytest.mark.parametrize(
    ("sampling", "reply", "prompt"),
    [
        # No reasoning: the reply is max_new_tokens; 256 - 16 = 240 for the prompt.
        pytest.param({}, 16, 240, id="defaults"),
        pytest.param({"max_new_tokens": 100}, 100, 156, id="longer-verdict"),
        # Reasoning: the thought's budget plus the verdict's reserve; 256 - (100 + 32) = 124.
        pytest.param({"max_new_tokens": 100, "reasoning": {"enabled": True}}, 132, 124, id="reasoning"),
        pytest.param(
            {"max_new_tokens": 100, "reasoning": {"enabled": True, "verdict_tokens": 8}}, 108, 148, id="reasoning-8"
        ),
        # verdict_tokens set but reasoning off: not reserved.
        pytest.param({"max_new_tokens": 100, "reasoning": {"verdict_tokens": 8}}, 100, 156, id="reasoning-off"),
    ],
)
def test_the_budget_with_and_without_reasoning(sampling, reply, prompt):
    judge = _judge(**sampling)
    assert (judge.sampling.reply_tokens, judge.max_prompt_tokens) == (reply, prompt)


def _subtractions_from_max_model_len(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            left = node.left
            name = left.attr if isinstance(left, ast.Attribute) else left.id if isinstance(left, ast.Name) else None
            if name == "max_model_len":
                lines.append(node.lineno)
    return lines


def test_a_reader_following_max_model_len_finds_one_home(tmp_path):
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _subtractions_from_max_model_len(path))
    }
    assert list(found) == ["config/judge.py"], f"the prompt budget is computed outside its home: {found}"
    assert len(found["config/judge.py"]) == 1
    # The walk sees the pattern it guards against.
    sample = tmp_path / "probe.py"
    sample.write_text("budget = cfg.max_model_len - cfg.sampling.max_new_tokens\n", encoding="utf-8")
    assert _subtractions_from_max_model_len(sample) == [1]


def _reply(tokens: int) -> Generation:
    return Generation(text="I cannot decide", output_tokens=tokens)


class _Replies:
    def __init__(self, tokens: int):
        self.tokens = tokens

    def generate(self, requests):
        return [_reply(self.tokens) for _ in requests]


@pytest.mark.parametrize(
    ("tokens", "why"),
    [
        # A reasoning judge with max_new_tokens 20 and verdict_tokens 8: a reply of 20 tokens
        # finished its thought and wrote something that is not a verdict (it was not cut).
        pytest.param(20, "no_label", id="thought-budget-only"),
        # 28 tokens: the whole reply budget was used, the verdict was cut off.
        pytest.param(28, TRUNCATED, id="whole-reply-budget"),
    ],
)
def test_a_reply_is_truncated_only_when_it_used_the_whole_reply_budget(tokens, why):
    judge = _judge(max_new_tokens=20, reasoning={"enabled": True, "verdict_tokens": 8})
    reader = Reader(("1", "0"), (1, 0), VerdictParser("strict"))
    request = JudgeRequest(messages=({"role": "user", "content": "q"},))
    (vote,) = read_replies(_Replies(tokens), [request], reader, "text", reply_tokens=judge.sampling.reply_tokens)
    assert (vote.reason, vote.why) == (PARSE_FAILURE, why)


def _service(reasoning: bool, prompt_tokens: int, reply: Generation | None = None, top: dict | None = None):
    """The deployment's ``_run`` (the class behind Ray Serve's wrapper) on an object holding what it uses."""
    from nemo_genrm.config import validate
    from nemo_genrm.serve.app import JudgeDeployment
    from nemo_genrm.serve.config import ServiceConfig

    sampling = {"max_new_tokens": 20, "reasoning": {"enabled": reasoning, "verdict_tokens": 8}}
    cfg = validate(ServiceConfig, {"judge": {"model_name": "m", "max_model_len": 128, "sampling": sampling}})
    cls = JudgeDeployment.func_or_class

    async def generate_batch(_request):
        return reply

    async def top_logprobs_batch(_item):
        return top

    service = SimpleNamespace(
        cfg=cfg,
        generate_batch=generate_batch,
        top_logprobs_batch=top_logprobs_batch,
        _count_prompt_tokens=lambda _request: prompt_tokens,
    )
    service._generation_error = lambda error: cls._generation_error(service, error)
    return lambda call: asyncio.run(cls._run(service, call))


def test_the_service_finishes_length_at_the_whole_reply_budget():
    from nemo_genrm.serve.requests import ChatCall

    call = ChatCall(JudgeRequest(messages=({"role": "user", "content": "q"},)), None)
    for reasoning, tokens, finish in [(True, 20, "stop"), (True, 28, "length"), (False, 20, "length")]:
        response, _ = _service(reasoning, 0, Generation(text="1", prompt_tokens=5, output_tokens=tokens))(call)
        body = json.loads(response.body)
        assert body["choices"][0]["finish_reason"] == finish, (reasoning, tokens)


def test_the_service_tells_a_prompt_over_budget_from_an_engine_failure():
    from nemo_genrm.serve.requests import ChatCall

    call = ChatCall(JudgeRequest(messages=({"role": "user", "content": "q"},)), 2)
    # max_model_len 128 minus a reasoning reply of 20 + 8: 100 tokens for the prompt.
    for prompt_tokens, status, code in [(101, 400, PROMPT_TOO_LONG), (100, 500, ENGINE_ERROR)]:
        response, _ = _service(True, prompt_tokens)(call)
        error = json.loads(response.body)["error"]
        assert (response.status_code, error["code"]) == (status, code), prompt_tokens
    response, _ = _service(True, 101)(call)
    assert "128 tokens minus 28 for the reply: 100 for the prompt" in json.loads(response.body)["error"]["message"]
