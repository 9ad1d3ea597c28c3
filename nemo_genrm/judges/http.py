"""A judge behind any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Works with a vLLM or SGLang server, a hosted API, or this package's own judge service
(:mod:`nemo_genrm.serve`). One ``httpx.AsyncClient`` runs on a private event loop in a background
thread, so the synchronous :meth:`HttpJudge.generate` can be called from any thread, a Ray actor,
or code that already runs an event loop.

Failures stay per sample: a request that still fails after its retries becomes a
``Generation(text=None, error=...)`` with one of these codes:

- ``http_<status>``: the server answered with that status (e.g. ``http_500``, ``http_429``);
- ``prompt_too_long``: the server refused the prompt as longer than its context;
- ``http_timeout``: no answer within ``http.timeout_s`` (or the connect timeout);
- ``http_connect``: the connection could not be opened or was dropped;
- ``http_bad_response``: the server answered 200 with a body that cannot be read (not JSON,
  not exactly one choice, ``usage`` that is not an object of counts, a log-probability that is
  not a number in ``[-inf, 0]``; see :mod:`nemo_genrm.judges.http_replies`), or, when scoring,
  one without log-probabilities while other replies of the batch had them. Only that sample
  fails: the other replies of the call are read as usual;
- ``timeout``: the whole call passed its deadline (``fault_tolerance.step_timeout_s`` or
  ``call_timeout_s``) before this request finished, retries included;
- ``labels_not_in_top_logprobs`` (:meth:`HttpJudge.score`): none of the labels is among the
  first token's top log-probabilities.

A server gone for good (every request of every call refused, dropped, timed out or answered with
a 5xx after its retries, for longer than ``fault_tolerance.unavailable_grace_s``) raises
:class:`~nemo_genrm.errors.JudgeUnavailableError`
(:class:`~nemo_genrm.judges.http_transport.Reachability`); within the grace such calls count as
``unavailable_calls``. A 4xx is the request's fault, not the server's: it never counts. With ``temperature > 0`` each request is sampled with seed
``sampling.seed + request.vote``, so the votes on one prompt are independent draws.

429, 5xx, timeouts and connection errors are retried with exponential backoff and full jitter
(``Retry-After`` is honoured when present, capped at
:data:`nemo_genrm.judges.http_transport.MAX_RETRY_DELAY_S`). ``http.timeout_s`` bounds each
attempt whole (connect, send and the full reply), so a server that trickles bytes cannot hold
a request longer. When one request of a call has used up its retries on timeouts or dropped
connections and no request of the call has succeeded, the server is taken as hung: the call's
remaining requests fail at once with the same code instead of each waiting out its own
timeouts (see :func:`nemo_genrm.judges.http_transport.hung_server_bound_s` for the bound).

Credentials never leave in clear: a ``user:password@`` in ``base_url`` is sent as basic auth,
not in the URL, and every error text, log line and repr masks it and the API key
(:class:`nemo_genrm.guard.redact.Redactor`), redacting before any text is cut short.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from nemo_genrm.config import ConfigError, FaultToleranceConfig, JudgeConfig
from nemo_genrm.config.loading import typed
from nemo_genrm.errors import JudgeClosedError
from nemo_genrm.guard.redact import Redactor, mask_url, url_credentials, url_without_credentials
from nemo_genrm.judges.base import (
    Generation,
    Judge,
    JudgeRequest,
    JudgeStats,
    LabelScores,
    RequestLike,
)
from nemo_genrm.judges.deadline import remaining_s
from nemo_genrm.judges.http_replies import (
    BadReply,
    label_key_problems,
    label_probs,
    read_first_token_top,
    read_reply,
)
from nemo_genrm.judges.http_transport import (
    RETRY_STATUSES,
    CallBreaker,
    LoopThread,
    Reachability,
    RequestOutcome,
    Secret,
    failed_request,
    gather_until,
    json_object,
    parse_retry_after,
    retry_delay,
    status_error,
)
from nemo_genrm.judges.reasoning import settle_text
from nemo_genrm.judges.results import generation, label_scores

logger = logging.getLogger(__name__)

__all__ = ["SCORE_TOP_K", "HttpJudge"]

_DETAIL_CHARS = 200  # characters of a server's error body kept for the log

SCORE_TOP_K = 20
"""Top log-probabilities asked for when scoring labels (the OpenAI API's maximum)."""
RESULT_SLACK_S = 30.0
"""Extra wait for the loop thread past the call deadline (cancelled requests closing)."""


@dataclass
class _Prepared:
    """A request ready to send (messages) or already failed (error)."""

    messages: list[dict[str, str]] | None
    error: str | None = None
    truncated: bool = False
    vote: int = 0  # the request's sample index: its seed is sampling.seed + vote


class HttpJudge(Judge):
    """A judge served by an OpenAI-compatible chat-completions endpoint.

    Args:
        judge_config: The judge section (or a dict of one); ``model_name`` is the served model name,
            ``http.base_url`` the server root including ``/v1``. When ``tokenizer`` is set (a
            local path), prompts longer than ``max_model_len - max_new_tokens`` are shortened
            on the client with :func:`nemo_genrm.judges.fitting.fit_prompt`; otherwise they are
            sent as they are and a server-side length error becomes a ``prompt_too_long`` sample.
        fault_tolerance: Its ``step_timeout_s`` is the deadline of one :meth:`generate` /
            :meth:`score` call, retries included; requests unfinished by then end as ``timeout``.
        call_timeout_s: The same deadline given directly (wins over ``fault_tolerance``).
            With neither, :class:`~nemo_genrm.config.FaultToleranceConfig`'s default applies.

    Raises:
        ConfigError: The config is invalid, ``http.base_url`` is missing or not an http(s) URL,
            ``http.api_key_env`` names an environment variable that is not set, or the
            deadline is not positive.
    """

    def __init__(
        self,
        judge_config: JudgeConfig,
        *,
        fault_tolerance: FaultToleranceConfig | None = None,
        call_timeout_s: float | None = None,
    ):
        judge_config = typed(JudgeConfig, judge_config, type(self).__name__)
        ft = typed(FaultToleranceConfig, fault_tolerance or FaultToleranceConfig(), "HttpJudge")
        cfg = judge_config.http
        problems = []
        if not cfg.base_url:
            problems.append("judge.http.base_url is required for the http backend (e.g. http://127.0.0.1:8000/v1)")
        elif not cfg.base_url.startswith(("http://", "https://")):
            problems.append(f"judge.http.base_url must start with http:// or https://, got {mask_url(cfg.base_url)!r}")
        if call_timeout_s is not None and not call_timeout_s > 0:
            problems.append(f"call_timeout_s must be positive, got {call_timeout_s}")
        if problems:
            raise ConfigError(problems)
        self.config = judge_config
        self.call_timeout_s = float(call_timeout_s if call_timeout_s is not None else ft.step_timeout_s)
        self._base_url = url_without_credentials(cfg.base_url.rstrip("/"))
        self._url = self._base_url + "/chat/completions"
        credentials = url_credentials(cfg.base_url)
        self._url_auth = Secret(credentials) if credentials is not None else None
        self._api_key: Secret | None = None
        if cfg.api_key_env:
            value = os.environ.get(cfg.api_key_env)
            if not value:
                raise ConfigError(
                    f"judge.http.api_key_env names {cfg.api_key_env!r}, an environment variable "
                    "that is not set: export it or set api_key_env: null"
                )
            self._api_key = Secret(value)
        secrets = [self._api_key.reveal()] if self._api_key else []
        if self._url_auth is not None:
            user, password = self._url_auth.reveal()
            # A user name long enough to be a token (https://<token>@host) is masked as well,
            # and so is the basic-auth header value a server might quote back.
            basic = base64.b64encode(f"{user}:{password}".encode()).decode()
            secrets += [password, f"{user}:{password}", user if len(user) >= 8 else "", basic]
        self._redact = Redactor(secrets)
        self._tokenizer = self._load_tokenizer() if judge_config.tokenizer else None
        self._stats = JudgeStats()
        self._stats_lock = threading.Lock()
        self._reachability = Reachability(ft.unavailable_grace_s, self._base_url)
        self._closed = False
        self._loop = LoopThread(name=f"http-judge-{judge_config.model_name}")
        self._client, self._slots = self._loop.run(self._open())
        weakref.finalize(self, self._loop.stop)

    def __repr__(self) -> str:
        return f"HttpJudge(model={self.config.model_name!r}, url={self._url!r})"

    @property
    def tokenizer(self) -> Any:
        """The local ``judge.tokenizer`` (used to fit prompts), or ``None`` when not configured."""
        return self._tokenizer

    # ----------------------------------------------------------------------------- interface
    def generate(self, batch: Sequence[RequestLike]) -> list[Generation]:
        """Write the judge's reply to each conversation (see :meth:`Judge.generate`)."""
        return self.generate_counted(batch)[0]

    def generate_counted(self, batch: Sequence[RequestLike]) -> tuple[list[Generation], JudgeStats]:
        """See :meth:`Judge.generate_counted`; requests and retries sent are under ``extra``."""
        sampling = self.config.sampling
        prepared = self._prepare(batch, sampling.reply_tokens)
        extra = {"max_tokens": sampling.reply_tokens}
        outcomes, unreachable = self._send(prepared, extra)
        results = []
        for prep, out in zip(prepared, outcomes, strict=True):
            if out.error is not None:
                results.append(generation(out.error, truncated=prep.truncated))
                continue
            try:
                reply = read_reply(out.body)
            except BadReply as exc:
                self._log_bad_reply(exc)
                results.append(generation("http_bad_response", truncated=prep.truncated))
                continue
            value = (reply.text, reply.completion_tokens) if reply.text is not None else "http_bad_response"
            if sampling.reasoning.enabled and reply.text is not None:  # the verdict after the thought only
                value = (reply.text, reply.completion_tokens, *self._thought_of(reply))
            results.append(generation(value, prompt_tokens=reply.prompt_tokens, truncated=prep.truncated))
        return results, self._counted(JudgeStats.of_call("generate", results), outcomes, unreachable)

    def _thought_of(self, reply) -> tuple[str, int, str | None]:
        """A reasoning judge's reply read by :func:`~nemo_genrm.judges.reasoning.settle_text`."""
        count = None
        if self._tokenizer is not None:
            count = lambda text: len(self._tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
        text, thought, cut = settle_text(reply.text, reply.ran_out, count)
        if cut is not None and not thought:
            thought = reply.completion_tokens  # no tokenizer here: the whole cut reply is thought
        return text, thought, cut

    def score(self, batch: Sequence[RequestLike], labels: Sequence[str]) -> list[LabelScores]:
        """Label probabilities from the first reply token's top log-probabilities.

        Asks for ``max_tokens: 1, logprobs: true, top_logprobs: SCORE_TOP_K``. Token strings are
        matched to labels after stripping whitespace (the probabilities of ``"1"`` and ``" 1"``
        add up), then renormalised over the labels found. A label outside the top-k gets
        probability 0; a sample where no label is found is a ``labels_not_in_top_logprobs`` error.

        Raises:
            ConfigError: A label is empty, repeated or contains whitespace (several tokens: use
                ``verdict_from: text``), a label is more than one token of ``judge.tokenizer``, or
                no reply of the batch carries log-probabilities (the server does not give them;
                a single reply without them is an ``http_bad_response`` sample instead).
        """
        return self.score_counted(batch, labels)[0]

    def score_counted(
        self, batch: Sequence[RequestLike], labels: Sequence[str]
    ) -> tuple[list[LabelScores], JudgeStats]:
        """See :meth:`score` and :meth:`Judge.score_counted`."""
        keys = self._check_labels(labels)
        tops, outcomes, unreachable = self._first_token_logprobs(batch, SCORE_TOP_K)
        results = []
        for top, truncated, prompt_tokens in tops:
            if isinstance(top, str):
                results.append(label_scores(top, truncated=truncated))
                continue
            probs = label_probs(top, keys)
            value = probs if probs is not None else "labels_not_in_top_logprobs"
            results.append(label_scores(value, prompt_tokens=prompt_tokens, truncated=truncated))
        return results, self._counted(JudgeStats.of_call("score", results), outcomes, unreachable)

    def top_logprobs(self, batch: Sequence[RequestLike], k: int) -> list[dict[str, float] | None]:
        """The ``k`` most likely first reply tokens per request (see :meth:`Judge.top_logprobs`).

        Raises:
            ConfigError: No reply of the batch carries log-probabilities.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        tops, outcomes, unreachable = self._first_token_logprobs(batch, k)
        # Not a generate or score call: only the tokens read and the transport are counted.
        counts = JudgeStats(prompt_tokens=sum(row[2] for row in tops), truncated=sum(row[1] for row in tops))
        self._counted(counts, outcomes, unreachable)
        return [None if isinstance(top, str) else top for top, _, _ in tops]

    def check_score_labels(self, labels: Sequence[str]) -> None:
        """Whether :meth:`score` can score ``labels``, checked before any request (at start-up).

        Raises:
            ConfigError: See :meth:`score`; a label is also refused when it cannot be known to
                be one token: without ``judge.tokenizer``, only labels of letters alone or one
                digit are taken as one token (``[[A]]`` is several in common tokenizers).
        """
        self._check_labels(labels)

    def stats(self) -> JudgeStats:
        """Counters since start (requests and retries under ``extra``)."""
        with self._stats_lock:
            snapshot = JudgeStats(**{**self._stats.__dict__, "extra": dict(self._stats.extra)})
        return snapshot

    def shutdown(self) -> None:
        """Close the HTTP client and stop the loop thread; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._client.aclose())
        finally:
            self._loop.stop()

    # ------------------------------------------------------------------------------ helpers
    def _load_tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.config.tokenizer_name)

    async def _open(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        cfg = self.config.http
        headers = {"Content-Type": "application/json"}
        auth = None
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.reveal()}"
        elif self._url_auth is not None:  # sent as a header, so no URL carries the password
            auth = httpx.BasicAuth(*self._url_auth.reveal())
        timeout = httpx.Timeout(cfg.timeout_s, connect=min(cfg.connect_timeout_s, cfg.timeout_s))
        limits = httpx.Limits(max_connections=cfg.max_concurrency, max_keepalive_connections=cfg.max_concurrency)
        client = httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits, auth=auth)
        return client, asyncio.Semaphore(cfg.max_concurrency)

    def _check_labels(self, labels: Sequence[str]) -> list[str]:
        """The labels' stripped keys; raises ConfigError when they cannot be scored here."""
        keys, problems = label_key_problems(labels, self._tokenizer, self.config.tokenizer_name)
        if not self.config.http.supports_logprobs:
            problems.append(
                "judge.http.supports_logprobs is false, so labels cannot be scored: set "
                "verdict_from: text, or point base_url at a server that returns top_logprobs"
            )
        if problems:
            raise ConfigError(problems)
        return keys

    def _first_token_logprobs(
        self, batch: Sequence[RequestLike], k: int
    ) -> tuple[list[tuple[dict[str, float] | str, bool, int]], list[RequestOutcome], bool]:
        """Per request: (token -> logprob, or an error code), truncated, prompt tokens; the
        transport outcomes; whether no request reached the server."""
        prepared = self._prepare(batch, 1)
        extra = {"max_tokens": 1, "logprobs": True, "top_logprobs": k}
        outcomes, unreachable = self._send(prepared, extra)
        rows: list[tuple[dict[str, float] | str, bool, int]] = []
        missing = with_logprobs = 0
        for prep, out in zip(prepared, outcomes, strict=True):
            if out.error is not None:
                rows.append((out.error, prep.truncated, 0))
                continue
            try:
                reply, top = read_reply(out.body), read_first_token_top(out.body)
            except BadReply as exc:
                self._log_bad_reply(exc)
                rows.append(("http_bad_response", prep.truncated, 0))
                continue
            if top is None:
                missing += reply.text is not None  # a reply, but without logprobs
                rows.append(("http_bad_response", prep.truncated, 0))
                continue
            with_logprobs += 1
            rows.append((top, prep.truncated, reply.prompt_tokens))
        if missing and not with_logprobs:  # no reply had them: the server cannot give them
            raise ConfigError(
                f"the server at {self._base_url} answered without logprobs for model "
                f"{self.config.model_name!r} (none of {missing} replies had them): set "
                "judge.verdict_from: text (and http.supports_logprobs: false), or serve the judge "
                "with a server that returns top_logprobs (vLLM, SGLang, nemo_genrm.serve)"
            )
        return rows, outcomes, unreachable

    def _prepare(self, batch: Sequence[RequestLike], max_new_tokens: int) -> list[_Prepared]:
        """Messages to send per request, shortened to fit when a tokenizer is configured."""
        requests = [JudgeRequest.of(item) for item in batch]
        if self._tokenizer is None:
            return [_Prepared(messages=[dict(m) for m in req.messages], vote=req.vote) for req in requests]
        from nemo_genrm.judges.fitting import fit_prompt

        budget = self.config.max_model_len - max_new_tokens
        prepared = []
        for req in requests:
            fitted = fit_prompt(req, self._tokenizer, budget)
            if fitted.error is not None or fitted.messages is None:
                prepared.append(_Prepared(messages=None, error=fitted.error, truncated=fitted.truncated, vote=req.vote))
            else:
                messages = [dict(m) for m in fitted.messages]
                prepared.append(_Prepared(messages=messages, truncated=fitted.truncated, vote=req.vote))
        return prepared

    def _send(self, prepared: list[_Prepared], extra: dict[str, Any]) -> tuple[list[RequestOutcome], bool]:
        """Send every prepared request; the outcomes, and whether none reached the server.

        Raises:
            JudgeClosedError: After :meth:`shutdown`.
            JudgeUnavailableError: The server has been unavailable (unreachable, or 5xx to every
                request) past the grace period.
        """
        if self._closed:
            raise JudgeClosedError("HttpJudge was shut down; create a new one")
        began = time.monotonic()
        sampling = self.config.sampling
        base: dict[str, Any] = {"model": self.config.model_name, "temperature": sampling.temperature, "n": 1}
        # Only what changes the reply is sent: top_p 1.0 is every server's default, and a seed
        # does nothing in greedy decoding. A greedy request then carries exactly the fields a
        # reward-bench API request carries (its RewardBench preset relies on that).
        if sampling.top_p < 1.0:
            base["top_p"] = sampling.top_p
        base.update(extra)

        breaker = CallBreaker()

        def job(prep: _Prepared) -> Any:
            if prep.messages is None:
                return lambda: failed_request(prep.error or "prompt_too_long")
            payload = {**base, "messages": prep.messages}
            if sampling.temperature > 0:  # each vote its own draw: servers repeat an equal (prompt, seed)
                payload["seed"] = sampling.seed + prep.vote
            return lambda: self._post(payload, breaker)

        deadline = remaining_s(self.call_timeout_s)  # the step's own deadline when earlier
        coro = gather_until([job(prep) for prep in prepared], deadline)
        outcomes = self._loop.run(coro, timeout_s=deadline + RESULT_SLACK_S)
        sent = [out.error for prep, out in zip(prepared, outcomes, strict=True) if prep.messages is not None]
        unreachable = self._reachability.record(sent, began)
        failed = Counter(o.error for o in outcomes if o.error is not None)
        if failed:
            detail = next((o.detail for o in outcomes if o.detail), "")
            logger.warning(
                "%d of %d judge requests failed (%s)%s%s",
                sum(failed.values()),
                len(outcomes),
                ", ".join(f"{err}: {n}" for err, n in failed.most_common()),
                f"; the server said: {detail}" if detail else "",
                f"; {breaker.skipped} not sent: {self._base_url} looked hung ({breaker.tripped})"
                if breaker.skipped
                else "",
            )
        return outcomes, unreachable

    async def _post(self, payload: dict[str, Any], breaker: CallBreaker) -> RequestOutcome:
        """One request with retries; never raises for transport or server failures.

        The request keeps its concurrency slot through its backoff sleeps, so a struggling
        server sees fewer requests, and the first requests of a hung server give up (tripping
        the call's breaker) before any queued request starts waiting.
        """
        async with self._slots:
            if breaker.tripped is not None:  # the server looked hung: do not wait again
                breaker.skipped += 1
                return RequestOutcome(body=None, error=breaker.tripped)
            outcome = await self._attempts(payload)
        if outcome.error is not None:
            breaker.gave_up(outcome.error)
        else:
            breaker.succeeded = True
        return outcome

    async def _attempts(self, payload: dict[str, Any]) -> RequestOutcome:
        cfg = self.config.http
        error, detail = "http_error", ""
        for attempt in range(cfg.max_retries + 1):
            retry_after = None
            try:
                # timeout_s bounds the whole attempt: httpx's own timeouts are per read.
                response = await asyncio.wait_for(self._client.post(self._url, json=payload), cfg.timeout_s)
            except (httpx.TimeoutException, asyncio.TimeoutError):
                error = "http_timeout"
            except (httpx.TransportError, OSError) as exc:
                error = "http_connect"
                logger.debug("request to %s failed: %s", self._url, type(exc).__name__)
            else:
                if response.status_code == 200:
                    return RequestOutcome(body=json_object(response), retries=attempt)
                error = status_error(response)
                detail = self._redact.clip(response.text, _DETAIL_CHARS)
                if response.status_code not in RETRY_STATUSES:
                    return RequestOutcome(body=None, error=error, retries=attempt, detail=detail)
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                logger.debug("judge server answered %d, retrying", response.status_code)
            if attempt < cfg.max_retries:
                await asyncio.sleep(retry_delay(attempt, cfg.backoff_s, retry_after))
        return RequestOutcome(body=None, error=error, retries=cfg.max_retries, detail=detail)

    def _log_bad_reply(self, exc: BadReply) -> None:
        logger.debug("unreadable reply from %s: %s", self._url, self._redact.clip(str(exc), 200))

    def _counted(self, counts: JudgeStats, outcomes: list[RequestOutcome], unreachable: bool) -> JudgeStats:
        """Add the call's requests and retries (and whether it found the server unreachable) to
        ``counts``, and ``counts`` to the totals."""
        counts.unavailable_calls = int(unreachable)
        counts.extra = {"http_requests": len(outcomes), "http_retries": sum(o.retries for o in outcomes)}
        with self._stats_lock:
            extra = {key: self._stats.extra.get(key, 0) + value for key, value in counts.extra.items()}
            self._stats = self._stats.merge(counts)
            self._stats.extra = extra
        return counts
