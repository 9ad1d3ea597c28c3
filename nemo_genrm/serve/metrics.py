"""The judge service's request counters and their Prometheus text.

One Ray actor holds a :class:`MetricsStore` for all replicas of a service (created by
:func:`nemo_genrm.serve.start_judge_service`); the replicas (:mod:`nemo_genrm.serve.app`) record
into it and render :func:`prometheus_text` for ``/metrics``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from nemo_genrm.samples.metrics import percentile

__all__ = ["LATENCY_WINDOW", "RECENT_REQUESTS", "MetricsStore", "prometheus_text"]

RECENT_REQUESTS = 10_000
"""Requests the service's latency percentiles are over: a service answers many requests a second,
so its window is long (the environment's, :data:`nemo_genrm.samples.metrics.RECENT_JUDGE_CALLS`,
counts judge calls, about one per training step)."""

LATENCY_WINDOW = RECENT_REQUESTS
"""The former name of :data:`RECENT_REQUESTS`, kept for code that imports it."""


class MetricsStore:
    """Request counters and a latency window of one service, shared by all its replicas.

    One Ray actor holds it (created by :func:`start_judge_service`); kept in this light module so
    the actor's process does not import Ray Serve or FastAPI.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter."""
        self.requests = 0
        self.errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.batches = 0
        self.batched_requests = 0
        self.max_batch_size = 0
        self.rejected: dict[str, int] = {}
        self.latencies: deque[float] = deque(maxlen=RECENT_REQUESTS)

    def record(
        self,
        ok: bool,
        latency_s: float,
        prompt_tokens: int,
        completion_tokens: int,
        rejected: str | None = None,
    ) -> None:
        """Count one answered request; ``rejected`` is the error code of one refused before it
        reached the engine (e.g. ``unauthorized``, ``body_too_large``, ``invalid_text``)."""
        self.requests += 1
        self.errors += 0 if ok else 1
        if rejected is not None:
            self.rejected[rejected] = self.rejected.get(rejected, 0) + 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.latencies.append(latency_s)

    def record_batch(self, size: int) -> None:
        """Count one engine call that served ``size`` requests."""
        self.batches += 1
        self.batched_requests += size
        self.max_batch_size = max(self.max_batch_size, size)

    def snapshot(self) -> dict[str, Any]:
        """Counters, latency p50/p95 over the last requests, and engine batch sizes."""
        # Same definition of p50/p95 as the environment's genrm/ metrics; 0.0 (not NaN) before
        # the first request, since the JSON endpoint cannot carry NaN.
        latencies = list(self.latencies)
        return {
            "requests": self.requests,
            "errors": self.errors,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_p50_s": percentile(latencies, 50) if latencies else 0.0,
            "latency_p95_s": percentile(latencies, 95) if latencies else 0.0,
            "engine_batches": self.batches,
            "mean_batch_size": self.batched_requests / self.batches if self.batches else 0.0,
            "max_batch_size": self.max_batch_size,
            "rejected": sum(self.rejected.values()),
            "rejected_by_code": dict(self.rejected),
        }


def prometheus_text(snapshot: dict[str, Any]) -> str:
    """The metrics snapshot in Prometheus' text exposition format."""
    rows = [
        (
            "genrm_serve_requests_total",
            "counter",
            "Chat completion requests answered.",
            snapshot["requests"],
        ),
        (
            "genrm_serve_errors_total",
            "counter",
            "Requests answered with an error.",
            snapshot["errors"],
        ),
        (
            "genrm_serve_prompt_tokens_total",
            "counter",
            "Prompt tokens processed.",
            snapshot["prompt_tokens"],
        ),
        (
            "genrm_serve_completion_tokens_total",
            "counter",
            "Tokens generated.",
            snapshot["completion_tokens"],
        ),
        (
            "genrm_serve_engine_batches_total",
            "counter",
            "Engine calls.",
            snapshot["engine_batches"],
        ),
        (
            "genrm_serve_mean_batch_size",
            "gauge",
            "Requests per engine call.",
            snapshot["mean_batch_size"],
        ),
    ]
    lines = []
    for name, kind, help_text, value in rows:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
    lines += [
        "# HELP genrm_serve_rejected_total Requests refused before reaching the engine.",
        "# TYPE genrm_serve_rejected_total counter",
    ]
    by_code = snapshot.get("rejected_by_code") or {}
    lines += [f'genrm_serve_rejected_total{{code="{code}"}} {n}' for code, n in sorted(by_code.items())]
    lines += [
        "# HELP genrm_serve_latency_seconds Request latency over the last requests.",
        "# TYPE genrm_serve_latency_seconds summary",
        f'genrm_serve_latency_seconds{{quantile="0.5"}} {snapshot["latency_p50_s"]}',
        f'genrm_serve_latency_seconds{{quantile="0.95"}} {snapshot["latency_p95_s"]}',
    ]
    if (replica := snapshot.get("replica")) is not None:
        label = f'{{replica="{replica["id"]}"}}'
        lines += [
            "# HELP genrm_serve_replica_open_requests Requests open on the replica that answered (bodies"
            " still arriving included).",
            "# TYPE genrm_serve_replica_open_requests gauge",
            f"genrm_serve_replica_open_requests{label} {replica['open_requests']}",
            "# HELP genrm_serve_replica_open_clients Clients (key and address) holding open requests on"
            " the replica that answered.",
            "# TYPE genrm_serve_replica_open_clients gauge",
            f"genrm_serve_replica_open_clients{label} {replica['open_clients']}",
        ]
    return "\n".join(lines) + "\n"
