"""The judge service: any judge engine behind an OpenAI-compatible HTTP API, on Ray Serve.

Start it with ``python -m nemo_genrm.serve --config <yaml>``, or from Python with
:func:`start_judge_service` (``docs/serving.md``).

- :mod:`~nemo_genrm.serve.service`: load a service config; start, wait for and stop a service; the CLI;
- :mod:`~nemo_genrm.serve.app`: the Ray Serve deployment (endpoints, request rules, batching);
- :mod:`~nemo_genrm.serve.config`: the ``judge:`` and ``serve:`` sections;
- :mod:`~nemo_genrm.serve.guard`: the service's network edge (bearer keys, body and JSON limits)
  and the engine's health, free of Ray Serve and FastAPI so it is unit-tested without a cluster;
- :mod:`~nemo_genrm.serve.metrics`: request counters shared by the replicas, and their Prometheus text.
"""

from __future__ import annotations

from nemo_genrm.serve.service import (
    LATENCY_WINDOW,
    METRICS_NAMESPACE,
    RECENT_REQUESTS,
    MetricsStore,
    ServeConfig,
    ServiceConfig,
    load_service_config,
    prometheus_text,
    start_judge_service,
    stop_judge_service,
    wait_until_healthy,
)

__all__ = [
    "LATENCY_WINDOW",
    "METRICS_NAMESPACE",
    "RECENT_REQUESTS",
    "MetricsStore",
    "ServeConfig",
    "ServiceConfig",
    "load_service_config",
    "prometheus_text",
    "start_judge_service",
    "stop_judge_service",
    "wait_until_healthy",
]
