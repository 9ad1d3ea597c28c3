"""GenRMResourcesServer, NeMo Gym's real SimpleResourcesServer app, answering real /verify posts.

The server is built as Gym's ``run_webserver`` builds it (its config validated from a Gym
config mapping), served by uvicorn on 127.0.0.1, and its judge is the HTTP engine talking to an
OpenAI-compatible stand-in. Runs where NeMo Gym is installed (CI: .venv-dropins).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from unittest.mock import MagicMock

import pytest

pytest.importorskip(
    "nemo_gym", reason="needs NeMo Gym (CI installs it in .venv-dropins from ci/dropins/requirements.txt)"
)

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from dropins_support import RuleServer, http_section  # noqa: E402
from nemo_gym.openai_utils import NeMoGymResponse  # noqa: E402
from nemo_gym.server_utils import ServerClient  # noqa: E402

from nemo_genrm.integrations.nemo_gym import GenRMResourcesServer, GenRMResourcesServerConfig  # noqa: E402
from nemo_genrm.testing.stand_in_judges import (  # noqa: E402
    StandInServer,
    criterion_in_response,
    dead_base_url,
    more_working_wins,
    multi_token_reply,
    working,
)

pytestmark = pytest.mark.dropins


def _response(text: str | None) -> dict:
    """A Responses-API output: a reasoning item, then the assistant message (when ``text``)."""
    output = [{"type": "reasoning", "id": "rs1", "summary": [{"type": "summary_text", "text": "RIGHT, surely"}]}]
    if text is not None:
        output.append(
            {
                "type": "message",
                "id": "m1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    response = NeMoGymResponse(
        id="resp1",
        created_at=0,
        model="policy",
        object="response",
        output=output,
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
    )
    return response.model_dump(mode="json")


def _request(text: str | None, expected: str | None = "4") -> dict:
    body = {
        "responses_create_params": {"input": [{"role": "user", "content": "What is 2+2?"}]},
        "response": _response(text),
    }
    if expected is not None:
        body["expected_answer"] = expected
    return body


class _Served:
    """The server's FastAPI app under uvicorn on a free local port."""

    def __init__(self, server: GenRMResourcesServer) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self._uv = uvicorn.Server(uvicorn.Config(server.setup_webserver(), log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._uv.run, kwargs={"sockets": [sock]}, daemon=True)

    def __enter__(self) -> _Served:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._uv.started:
            assert time.monotonic() < deadline, "the resources server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._uv.should_exit = True
        self._thread.join(timeout=10)


def _server(genrm: dict) -> GenRMResourcesServer:
    # As Gym's run_webserver does: the server's config mapping plus its name, validated.
    config = GenRMResourcesServerConfig.model_validate(
        {"host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "genrm": genrm, "name": "genrm_judge"}
    )
    return GenRMResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))


def test_verify_posts_get_rewards_and_failure_fields():
    cases = {
        "right": (_request("Answer: RIGHT"), 1.0, False, None, "judged"),
        "wrong": (_request("Answer: WRONG"), 0.0, False, None, "judged"),
        "unparseable": (_request("Answer: CONFUSE"), 0.0, True, "judge_unparseable", "parse_failure"),
        "crash": (_request("Answer: CRASH"), 0.0, True, "judge_failed", "judge_error"),
        "no message": (_request(None), 0.0, False, "genrm:no_answer", "no_answer"),
        "no reference": (_request("Answer: RIGHT", expected=None), 0.0, True, "verifier_error", "missing_ground_truth"),
    }
    with RuleServer() as judge_server:
        server = _server(http_section(judge_server.base_url))
        try:
            with _Served(server) as served:

                async def post_all():
                    async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
                        return await asyncio.gather(*(client.post("/verify", json=c[0]) for c in cases.values()))

                replies = asyncio.run(post_all())
        finally:
            server.shutdown_judge()
    for (name, (_, reward, masked, kind, reason)), reply in zip(cases.items(), replies, strict=True):
        assert reply.status_code == 200, (name, reply.text)
        got = reply.json()
        assert (got["reward"], got["mask_sample"], got["failure_kind"], got["genrm_reason"]) == (
            reward,
            masked,
            kind,
            reason,
        ), name
        assert (got["failure_reason"] is None) == (kind is None), name
        assert got["response"]["id"] == "resp1"  # the request's fields come back, as Gym's servers do
    # The judge saw the answer, never the reasoning item; the question came from the input.
    assert judge_server.prompts and all("surely" not in p and "What is 2+2?" in p for p in judge_server.prompts)
    assert len(judge_server.prompts) == 4  # no message and no reference: nothing sent to the judge


def test_content_parts_are_read_as_text_and_a_message_without_text_is_bad_input():
    """Responses-API content parts: the output message's text parts are the response, the input's
    text parts the question (an image beside them left out); a message holding no text part is
    bad_input with its why, not masked, never judged."""
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}
    parts = _request("Working.")
    parts["response"]["output"][-1]["content"].append(
        {"type": "output_text", "text": "Answer: RIGHT", "annotations": []}
    )
    parts["responses_create_params"]["input"] = [
        {
            "role": "user",
            "content": [image, {"type": "input_text", "text": "Look:"}, {"type": "input_text", "text": "3+3?"}],
        }
    ]
    empty = _request("Answer: RIGHT")
    empty["response"]["output"][-1]["content"] = []
    with RuleServer() as judge_server:
        server = _server(http_section(judge_server.base_url))
        try:
            with _Served(server) as served:
                judged, bad = _post_all(served.url, [parts, empty])
        finally:
            server.shutdown_judge()
        prompts = judge_server.prompts
    assert (judged["reward"], judged["genrm_reason"], judged["genrm_why"], judged["failure_kind"]) == (
        1.0,
        "judged",
        None,
        None,
    )
    assert (bad["reward"], bad["mask_sample"], bad["genrm_reason"], bad["genrm_why"], bad["failure_kind"]) == (
        0.0,
        False,
        "bad_input",
        "no_text_part",
        "genrm:bad_input",
    )
    assert "no_text_part" in bad["failure_reason"]
    assert len(prompts) == 1 and "Look:\n3+3?" in prompts[0]  # the question: the input's text parts


def test_config_must_name_the_judge():
    with pytest.raises(ValueError, match="genrm"):
        GenRMResourcesServer(
            config=GenRMResourcesServerConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="x"),
            server_client=MagicMock(spec=ServerClient),
        )


def test_verify_with_an_in_process_engine(ray_cluster, tiny_cache_dir):
    """The same server with this package's DTensor engine: a tiny judge whose weights answer 1."""
    from nemo_genrm.testing import cached_tiny_judge

    genrm = {
        "judge": {
            "backend": "dtensor",
            "model_name": str(cached_tiny_judge("1", cache_dir=tiny_cache_dir)),
            "precision": "float32",
            "max_model_len": 1024,
        },
        "resources": {"gpus_per_replica": 0, "cpus_per_replica": 1.0},
    }
    server = _server(genrm)
    try:
        with _Served(server) as served, httpx.Client(base_url=served.url, timeout=300) as client:
            judged = client.post("/verify", json=_request("Answer: 5")).json()
            empty = client.post("/verify", json=_request("")).json()
    finally:
        server.shutdown_judge()
    assert (judged["reward"], judged["verdict"], judged["mask_sample"], judged["genrm_reason"]) == (
        1.0,
        1,
        False,
        "judged",
    )
    assert (empty["reward"], empty["failure_kind"], empty["genrm_reason"]) == (0.0, "genrm:no_answer", "no_answer")


def _post_all(url: str, bodies: list[dict]) -> list[dict]:
    async def go():
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            return await asyncio.gather(*(client.post("/verify", json=b) for b in bodies))

    replies = asyncio.run(go())
    assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
    return [r.json() for r in replies]


def _win_rates(scores: list[int]) -> list[float]:
    out = []
    for i, mine in enumerate(scores):
        others = [s for j, s in enumerate(scores) if j != i]
        out.append(sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in others) / len(others))
    return out


def _judge(url: str) -> dict:
    return {"backend": "http", "model_name": "judge", "http": {"base_url": url, "max_retries": 0}}


def test_pairwise_groups_by_group_id_rubric_items_and_masks():
    """16 /verify posts in flight at once: 4 groups of 4 by group_id, one of them all but empty."""
    responses = [
        "Answer: 7",
        "7 because 3+4. Answer: 7",
        "Because 3+4, because sums. Answer: 7",
        "Because, because, because. Answer: 7",
    ]
    bodies, expected = [], []
    for g in range(4):
        texts = [responses[(i + g) % 4] for i in range(4)] if g < 3 else ["7 because", "", "", ""]
        for text in texts:
            body = _request(text, expected=None)
            body["group_id"] = f"rollout-{g}"
            bodies.append(body)
        expected += _win_rates([working(t) for t in texts]) if g < 3 else [0.0] * 4

    def rule(body: dict) -> str:
        text = StandInServer.user_text(body)
        return criterion_in_response(text) if "Criterion:" in text else more_working_wins(text)

    pairwise = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}}
    with StandInServer(rule) as judge_server:
        server = _server(
            {"judge": _judge(judge_server.base_url), "resources": {"gpus_per_replica": 0}, "reward": pairwise}
        )
        try:
            with _Served(server) as served:
                got = _post_all(served.url, bodies)
        finally:
            server.shutdown_judge()
        rubric_server = _server(
            {"judge": _judge(judge_server.base_url), "resources": {"gpus_per_replica": 0}, "reward": {"mode": "rubric"}}
        )
        proof = "Because p^2 = 2q^2, the parity argument gives a contradiction. Answer: irrational"
        body = _request(proof, expected=None)
        body["rubric"] = [{"criterion": "kw:contradiction", "weight": 2}, "kw:parity", "kw:induction"]
        try:
            with _Served(rubric_server) as served:
                (rubric,) = _post_all(served.url, [body])
        finally:
            rubric_server.shutdown_judge()
    assert [r["reward"] for r in got] == pytest.approx(expected)
    lone = got[12]
    assert (lone["genrm_reason"], lone["mask_sample"], lone["failure_kind"]) == (
        "incomplete_group",
        True,
        "genrm:incomplete_group",
    )
    assert [r["mask_sample"] for r in got[:12]] == [False] * 12
    assert rubric["reward"] == pytest.approx(0.75) and not rubric["mask_sample"]


def test_malformed_rubric_fields_are_bad_input_never_judged():
    """A request's rubric that is not a list of criteria: reward 0, bad_input, not masked."""
    malformed = [
        {"criterion": "kw:because", "weight": 1},
        "kw:because",
        [3],
        [{"criterion": "kw:because", "weight": 0}],
    ]
    bodies = []
    for value in malformed:
        body = _request("x because y", expected=None)
        body["rubric"] = value
        bodies.append(body)
    with StandInServer(lambda body: criterion_in_response(StandInServer.user_text(body))) as judge_server:
        server = _server(
            {"judge": _judge(judge_server.base_url), "resources": {"gpus_per_replica": 0}, "reward": {"mode": "rubric"}}
        )
        try:
            with _Served(server) as served:
                got = _post_all(served.url, bodies)
        finally:
            server.shutdown_judge()
        asked = len(judge_server.bodies)
    fields = [(r["reward"], r["genrm_reason"], r["mask_sample"], r["failure_kind"]) for r in got]
    assert fields == [(0.0, "bad_input", False, "genrm:bad_input")] * len(malformed)
    assert all(r["genrm_why"] == "bad_rubric" for r in got)
    assert asked == 0


def test_a_judge_gone_for_good_is_a_typed_judge_failure():
    section = {
        "judge": _judge(dead_base_url()),
        "resources": {"gpus_per_replica": 0},
        "fault_tolerance": {"unavailable_grace_s": 0},
    }
    server = _server(section)
    try:
        with _Served(server) as served:
            (got,) = _post_all(served.url, [_request("Answer: 4")])
    finally:
        server.shutdown_judge()
    assert (got["reward"], got["mask_sample"], got["failure_kind"]) == (0.0, True, "judge_failed")
    assert got["failure_reason"].startswith("JudgeUnavailableError")


def test_the_server_starts_no_ray_cluster_and_refuses_modes_it_cannot_feed(monkeypatch):
    import ray
    from nemo_gym.server_utils import _server_uses_ray

    from nemo_genrm.config import ConfigError

    assert _server_uses_ray(GenRMResourcesServer) is False
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("an HTTP judge needs no Ray cluster"))
    _server(http_section("http://127.0.0.1:9/v1")).shutdown_judge()
    with pytest.raises(ConfigError, match="group_size"):
        _server({**http_section("http://127.0.0.1:9/v1"), "reward": {"mode": "pairwise_group"}})

    def rule(body):
        return multi_token_reply(more_working_wins(StandInServer.user_text(body)))

    with StandInServer(rule) as judge_server:
        judge = {**_judge(judge_server.base_url), "verdict_from": "logprobs"}
        reward = {"mode": "pairwise_group", "pairwise_group": {"group_size": 4}}
        with pytest.raises(ConfigError, match="judge.tokenizer"):
            _server({"judge": judge, "resources": {"gpus_per_replica": 0}, "reward": reward})
