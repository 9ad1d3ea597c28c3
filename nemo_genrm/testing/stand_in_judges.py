"""Stand-in judges for the reward-integrity tests: verdicts that are a known function of what the
judge is shown, so every expected reward can be computed by hand.

Three behaviours, each as a rule on the text of a judge prompt (its last user message):

- :func:`more_working_wins` (pairwise) and :func:`criterion_in_response` (rubric) read the
  *whole* responses shown: a response's working is its number of ``because``; a criterion
  ``kw:<word>`` is met when ``<word>`` is in the response, reasoning included. A judge shown only
  an extracted final answer sees no working and no reasoning.
- :func:`seeded_verdict`: a judge that samples and honours its seed. Its verdict on a candidate
  ``ans-<n>`` is a fixed function of ``(n, seed)`` (:func:`seeded_bit`): equal seeds repeat the
  verdict, as an OpenAI-compatible server does for an equal (prompt, seed).
- :class:`StandInServer`: an OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 that
  replies with a rule, optionally with per-token log-probabilities (for instance the choice
  markers ``[[A]]``/``[[B]]`` as the three tokens ``[[``, ``A``, ``]]``, as real tokenizers
  split them: :func:`multi_token_reply`).

:class:`SeededJudge` is the in-process engine of the seeded rule: it reads each request's
``vote`` (its sample index) and samples with ``seed + vote``.
"""

from __future__ import annotations

import hashlib
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemo_genrm.judges.base import Generation, JudgeRequest, RequestLike
from nemo_genrm.testing.rule_judges import tagged_values
from nemo_genrm.testing.stand_ins import GenerateOnlyJudge

__all__ = [
    "Reply",
    "SeededJudge",
    "StandInServer",
    "criterion_in_response",
    "dead_base_url",
    "has_criterion_met",
    "more_letters_wins",
    "more_working_wins",
    "multi_token_reply",
    "seeded_bit",
    "seeded_verdict",
    "shown_responses",
    "working",
]

# A fenced block: <name-NONCE> on its own line, the text, </name-NONCE> (see nemo_genrm.guard.injection).
_FENCED = re.compile(r"<([A-Za-z][\w-]*?)-([0-9a-z]{4,64})>\n(.*?)\n</\1-\2>", re.DOTALL)
# The built-in pairwise and rubric templates without fences: the text after each header.
_HEADED = re.compile(r"^Response(?: [AB])?:\n(.*?)(?=\n\n(?:Response B:|Criterion:|If )|\Z)", re.DOTALL | re.MULTILINE)
_CRITERION = re.compile(r"kw:(\w+)")
_WORKING = re.compile(r"\bbecause\b", re.IGNORECASE)


def shown_responses(prompt_text: str) -> list[str]:
    """The policy texts a judge prompt shows: its fenced blocks, else the text under each
    ``Response:``/``Response A:``/``Response B:`` header."""
    fenced = [m.group(3) for m in _FENCED.finditer(prompt_text)]
    return fenced or [m.group(1) for m in _HEADED.finditer(prompt_text)]


def working(text: str) -> int:
    """How much working a response shows: its number of ``because``."""
    return len(_WORKING.findall(text))


def more_working_wins(prompt_text: str) -> str:
    """Pairwise: the response showing more working wins; equal working goes to the first shown
    (so in both orders the pair is a draw)."""
    shown = shown_responses(prompt_text)
    a, b = (shown + ["", ""])[:2]
    return "[[B]]" if working(b) > working(a) else "[[A]]"


def criterion_in_response(prompt_text: str) -> str:
    """Rubric: ``1`` when the criterion's ``kw:<word>`` is a word of the response shown."""
    criteria = _CRITERION.findall(prompt_text)
    shown = shown_responses(prompt_text)
    if not criteria or not shown:
        return "0"
    word = criteria[-1]
    return "1" if re.search(rf"(?<!kw:)\b{re.escape(word)}\b", shown[0], re.IGNORECASE) else "0"


def more_letters_wins(letter: str) -> Callable[[str], str]:
    """Pairwise rule: the response shown with more ``letter`` wins; equal counts go to the first
    shown. Reads every character of the responses, so it suits random text (a tiny policy's)."""

    def rule(prompt_text: str) -> str:
        shown = shown_responses(prompt_text)
        a, b = (shown + ["", ""])[:2]
        return "[[B]]" if b.count(letter) > a.count(letter) else "[[A]]"

    return rule


def has_criterion_met(prompt_text: str) -> str:
    """Rubric: ``1`` when the criterion's ``has:<c>`` (one character) is in the response shown."""
    found = re.findall(r"has:(\S)", prompt_text)
    shown = shown_responses(prompt_text)
    return "1" if found and shown and found[-1] in shown[0] else "0"


def seeded_bit(value: int, seed: int | None) -> int:
    """A fixed, seed-dependent coin: 1 or 0 for candidate value ``value`` sampled with ``seed``."""
    digest = hashlib.sha256(f"{value}:{seed}".encode()).digest()
    return digest[0] & 1


def seeded_verdict(prompt_text: str, seed: int | None) -> str:
    """Reference: the seeded coin of the prompt's last tagged value (the candidate's ``ans-<n>``)."""
    values = tagged_values(prompt_text)
    return str(seeded_bit(values[-1], seed)) if values else "0"


class SeededJudge(GenerateOnlyJudge):
    """In-process judge that samples with ``seed + request.vote`` (see :func:`seeded_verdict`).

    Args:
        seed: ``judge.sampling.seed`` of the config it stands in for.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.seen: list[tuple[str, int]] = []  # (prompt text, seed used)
        self._lock = threading.Lock()

    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        out = []
        for item in batch:
            request = JudgeRequest.of(item)
            seed = self.seed + getattr(request, "vote", 0)
            text = request.messages[-1]["content"]
            with self._lock:
                self.seen.append((text, seed))
            out.append(Generation(seeded_verdict(text, seed)))
        return out


# ------------------------------------------------------------------------------------ server
@dataclass
class Reply:
    """What the stand-in server answers to one request.

    Attributes:
        text: The reply text; ``None`` answers an HTTP error (``status``, else 500).
        tokens: Per reply token, ``(token, {candidate token: probability})``: sent as the
            OpenAI ``logprobs`` when the request asks for them (the token itself should be
            among its candidates).
        status: The HTTP status of an error reply (e.g. 503 for an engine down behind a proxy).
    """

    text: str | None
    tokens: list[tuple[str, dict[str, float]]] | None = None
    status: int = 500


def multi_token_reply(marker: str, confidence: float = 0.9) -> Reply:
    """``[[A]]`` or ``[[B]]`` as the three tokens ``[[``, the letter, ``]]``, with logprobs."""
    letter = marker.strip("[]")
    other = "B" if letter == "A" else "A"
    tokens = [
        ("[[", {"[[": 0.97, "[": 0.03}),
        (letter, {letter: confidence, other: 1.0 - confidence}),
        ("]]", {"]]": 0.99, "]": 0.01}),
    ]
    return Reply(marker, tokens)


@dataclass
class StandInServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 answering ``rule(body)``.

    ``rule`` gets the request body (``messages``, ``seed``, ``logprobs``...) and returns a
    :class:`Reply` (or a plain string). Every body received is kept in :attr:`bodies`. Use as a
    context manager; :attr:`base_url` ends in ``/v1``, :attr:`address` is ``host:port``.
    """

    rule: Callable[[dict[str, Any]], Reply | str | None]
    bodies: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def user_text(body: dict[str, Any]) -> str:
        """The last user message of a request body."""
        return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.bodies.append(body)
            reply = self.rule(body)
            reply = Reply(reply) if isinstance(reply, str) or reply is None else reply
            if reply.text is None:
                return JSONResponse({"error": {"message": "stand-in failure"}}, status_code=reply.status)
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": "stop",
            }
            if body.get("logprobs") and reply.tokens:
                steps = reply.tokens[: body.get("max_tokens") or len(reply.tokens)]
                choice["logprobs"] = {"content": [_logprob_entry(tok, tops) for tok, tops in steps]}
            words = len(self.user_text(body).split())
            usage = {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1}
            return JSONResponse({"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage})

        return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])

    def __enter__(self) -> StandInServer:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{sock.getsockname()[1]}"
        self.base_url = f"http://{self.address}/v1"
        self._server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the stand-in OpenAI server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


def _logprob_entry(token: str, tops: dict[str, float]) -> dict[str, Any]:
    ranked = sorted(tops.items(), key=lambda kv: -kv[1])
    top = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())} for t, p in ranked]
    chosen = next((e for e in top if e["token"] == token), top[0])
    return {**chosen, "top_logprobs": top}


def dead_base_url() -> str:
    """A ``base_url`` on 127.0.0.1 where nothing listens: every connection is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/v1"
