"""Serve a judge engine over an OpenAI-compatible HTTP API with Ray Serve.

Run it::

    uv run python -m nemo_genrm.serve --config examples/configs/serve_judge_tiny.yaml \\
        judge.model_name=/path/to/judge serve.port=8001

The YAML has a ``judge:`` section (:class:`nemo_genrm.config.JudgeConfig`, any backend) and a
``serve:`` section (:class:`ServeConfig`). Point a trainer at the service with
``judge.backend: http`` and ``judge.http.base_url`` set to the URL this prints. The endpoints
and their rules are in :mod:`nemo_genrm.serve_app` and ``docs/serving.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
import urllib.request
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from nemo_genrm.config import ConfigError, JudgeConfig, StrictModel, load_config, validate
from nemo_genrm.metrics import percentile
from nemo_genrm.ray_env import actor_options, actor_runtime_env, prepare_job_environment

logger = logging.getLogger(__name__)

METRICS_NAMESPACE = "nemo_genrm"
"""Ray namespace of the service's metrics actor."""
LATENCY_WINDOW = 10_000
"""Requests the latency percentiles are computed over."""


class ServeConfig(StrictModel):
    """The ``serve:`` section: where the service listens and how it batches."""

    host: str = Field(
        "127.0.0.1",
        description="Address the HTTP proxy binds; 0.0.0.0 exposes it (then an API key is required).",
    )
    port: int = Field(8000, ge=1, le=65535, description="HTTP port of the proxy.")
    app_name: str = Field("genrm-judge", min_length=1, description="Ray Serve application name.")
    route_prefix: str = Field(
        "/",
        pattern=r"^/",
        description="URL prefix of this service; several judges can share one port.",
    )
    served_model_name: str | None = Field(
        None, description="Name clients send as `model`; defaults to judge.model_name."
    )
    num_replicas: int = Field(1, ge=1, description="Serve replicas, each with its own engine.")
    max_ongoing_requests: int = Field(64, ge=1, description="Requests one replica holds at once.")
    max_batch_size: int = Field(32, ge=1, description="Requests merged into one engine call.")
    batch_wait_timeout_s: float = Field(
        0.01, ge=0.0, description="How long a batch waits to fill before it runs."
    )
    num_cpus_per_replica: float = Field(1.0, gt=0.0, description="CPUs reserved per replica.")
    num_gpus_per_replica: float = Field(
        0.0,
        ge=0.0,
        description="GPUs per replica (0 on CPU, or when the engine starts its own workers).",
    )
    startup_timeout_s: float = Field(
        600.0, gt=0.0, description="Longest wait for /health at start."
    )
    api_key_env: str | None = Field(
        None,
        description="Environment variable holding the API key clients must send as a Bearer token.",
    )
    api_key_file: str | None = Field(
        None, description="File whose first line is the API key (instead of api_key_env)."
    )
    require_api_key: bool | None = Field(
        None,
        description=(
            "null: a key is required when host is not a loopback address; true: always; "
            "false: never (an exposed service without authentication)."
        ),
    )
    max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Largest request body; larger ones get 413."
    )
    body_timeout_s: float = Field(
        30.0, gt=0.0, description="Longest time a request body may take to arrive (else 408)."
    )
    max_json_depth: int = Field(
        32, ge=4, description="Deepest nesting of a request's JSON (else 400)."
    )
    health_probe_interval_s: float = Field(
        10.0,
        gt=0.0,
        description="/health probes the engine with a one-line request when idle this long.",
    )
    engine_in_replica: bool | None = Field(
        None,
        description=(
            "Run the engine inside the replica process (dtensor with tensor_parallel_size 1 only; "
            "reserve its GPU with num_gpus_per_replica). false: the engine starts its own Ray "
            "workers (any backend). null: in the replica when possible."
        ),
    )


class ServiceConfig(StrictModel):
    """A judge service config: the engine and how it is served."""

    judge: JudgeConfig
    serve: ServeConfig = Field(default_factory=ServeConfig)

    @property
    def model_id(self) -> str:
        """The model name clients use."""
        return self.serve.served_model_name or self.judge.model_name

    @property
    def in_replica(self) -> bool:
        """Whether replicas run the engine in their own process (``engine_in_replica`` resolved)."""
        possible = self.judge.backend == "dtensor" and self.judge.tensor_parallel_size == 1
        return possible if self.serve.engine_in_replica is None else self.serve.engine_in_replica

    @property
    def api_key_required(self) -> bool:
        """Whether clients must send the API key (``require_api_key`` resolved)."""
        from nemo_genrm.serve_guard import is_loopback

        required = self.serve.require_api_key
        return not is_loopback(self.serve.host) if required is None else required

    @model_validator(mode="after")
    def _check(self) -> ServiceConfig:
        problems = []
        if self.serve.engine_in_replica and not (
            self.judge.backend == "dtensor" and self.judge.tensor_parallel_size == 1
        ):
            problems.append(
                "serve.engine_in_replica: true needs judge.backend dtensor with "
                f"tensor_parallel_size 1 (got {self.judge.backend}, tp "
                f"{self.judge.tensor_parallel_size}); set "
                "engine_in_replica: false or null so the engine starts its own workers"
            )
        has_key = bool(self.serve.api_key_env or self.serve.api_key_file)
        if self.serve.api_key_env and self.serve.api_key_file:
            problems.append("serve.api_key_env and serve.api_key_file are both set: keep one")
        if self.api_key_required and not has_key:
            problems.append(
                f"serve.host {self.serve.host!r} is reachable from other machines, so the service "
                "needs an API key: set serve.api_key_env (an environment variable holding it) or "
                "serve.api_key_file, or serve.require_api_key: false to serve without "
                "authentication"
                if self.serve.require_api_key is None
                else "serve.require_api_key is true: set serve.api_key_env or serve.api_key_file"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self


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
        self.latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)

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
    return "\n".join(lines) + "\n"


def load_service_config(path: str | Path, overrides: Sequence[str] = ()) -> ServiceConfig:
    """Load and validate a service YAML (``defaults:`` and ``key=value`` overrides honoured).

    Args:
        path: The YAML file with ``judge:`` and ``serve:`` sections.
        overrides: Hydra-style overrides, e.g. ``serve.port=8001``.

    Returns:
        The validated config.

    Raises:
        ConfigError: The file is missing or invalid (every problem listed).
    """
    return validate(ServiceConfig, load_config(path, overrides))


def start_judge_service(config: ServiceConfig | dict[str, Any] | Any, *, wait: bool = True) -> str:
    """Deploy the judge service on the current Ray cluster.

    Starts Ray (locally) when it is not running. Ray Serve's HTTP host and port are set once per
    cluster, so every service on one cluster uses the same ``serve.host``/``serve.port`` and a
    different ``serve.app_name`` and ``serve.route_prefix``.

    Args:
        config: A :class:`ServiceConfig`, or a dict/DictConfig with ``judge`` and ``serve``.
        wait: Block until ``/health`` answers. With ``False`` the replicas start in the
            background (start several services at once, then :func:`wait_until_healthy`).

    Returns:
        The base URL for OpenAI clients and ``judge.http.base_url``, e.g.
        ``http://127.0.0.1:8000/v1`` (``.../<route_prefix>/v1`` with a prefix).

    Raises:
        ConfigError: The config is invalid, the API key's variable or file is unset or empty,
            or Ray Serve already listens on another host/port.
        TimeoutError: ``/health`` did not answer within ``serve.startup_timeout_s``.
    """
    import ray
    from ray import serve
    from ray.serve.api import RunTarget, run_many

    from nemo_genrm.serve_app import JudgeDeployment

    from nemo_genrm.serve_guard import key_digest, load_api_key

    cfg = validate(ServiceConfig, config)
    try:
        api_key = load_api_key(cfg.serve.api_key_env, cfg.serve.api_key_file)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    # Replicas get the key's digest only: the key itself never enters Ray (actor arguments,
    # dashboards, logs).
    digest = key_digest(api_key) if api_key is not None else None
    if not ray.is_initialized():
        ray.init()
    if (
        cfg.in_replica
        and cfg.serve.num_gpus_per_replica == 0
        and ray.cluster_resources().get("GPU", 0) > 0
    ):
        logger.warning(
            "the judge engine runs inside replicas that reserve no GPU, so it runs on CPU: set "
            "serve.num_gpus_per_replica: 1 (or serve.engine_in_replica: false)"
        )
    prepare_job_environment(cfg.serve.startup_timeout_s)  # Serve's own actors use the job's
    serve.start(http_options={"host": cfg.serve.host, "port": cfg.serve.port})
    _check_proxy(cfg.serve)
    metrics = (
        ray.remote(num_cpus=0, runtime_env=actor_runtime_env())(MetricsStore)
        .options(
            name=_metrics_name(cfg.serve.app_name),
            namespace=METRICS_NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
        )
        .remote()
    )
    metrics.reset.remote()  # an actor left by an earlier run starts from zero
    deployment = JudgeDeployment.options(
        name=f"{cfg.serve.app_name}-judge",
        num_replicas=cfg.serve.num_replicas,
        max_ongoing_requests=cfg.serve.max_ongoing_requests,
        ray_actor_options=actor_options(
            num_cpus=cfg.serve.num_cpus_per_replica, num_gpus=cfg.serve.num_gpus_per_replica
        ),
    )
    target = RunTarget(
        target=deployment.bind(cfg.model_dump(), metrics, digest),
        name=cfg.serve.app_name,
        route_prefix=cfg.serve.route_prefix,
    )
    run_many(
        [target], wait_for_ingress_deployment_creation=wait, wait_for_applications_running=wait
    )
    host = "127.0.0.1" if cfg.serve.host in ("0.0.0.0", "::") else cfg.serve.host
    url = f"http://{host}:{cfg.serve.port}{cfg.serve.route_prefix.rstrip('/')}/v1"
    if wait:
        wait_until_healthy(url, cfg.serve.startup_timeout_s)
        logger.info("judge service %r for model %r at %s", cfg.serve.app_name, cfg.model_id, url)
    return url


def wait_until_healthy(url: str, timeout_s: float = 600.0) -> None:
    """Poll ``<url without /v1>/health`` until it answers 200.

    Args:
        url: The base URL :func:`start_judge_service` returned.
        timeout_s: Longest wait.

    Raises:
        TimeoutError: No 200 within ``timeout_s``.
    """
    health = url.removesuffix("/").removesuffix("/v1") + "/health"
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(health, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError as exc:  # proxy not listening yet, or routes not ready (404/503)
            last = exc
        time.sleep(0.2)
    raise TimeoutError(
        f"judge service did not become healthy at {health} within {timeout_s:.0f} s: {last}"
    )


def stop_judge_service(app_name: str = "genrm-judge") -> None:
    """Delete one service and its metrics actor; shut Ray Serve down when no service is left.

    Safe to call twice.

    Args:
        app_name: ``serve.app_name`` of the service.
    """
    import ray
    from ray import serve

    if not ray.is_initialized():
        return
    try:
        serve.delete(app_name)
        remaining = serve.status().applications
    except Exception as exc:  # Serve already shut down
        logger.debug("serve.delete(%r): %s", app_name, exc)
        remaining = {}
    if not remaining:
        serve.shutdown()
    with contextlib.suppress(ValueError):  # no such actor: already stopped
        ray.kill(ray.get_actor(_metrics_name(app_name), namespace=METRICS_NAMESPACE))


def _check_proxy(cfg: ServeConfig) -> None:
    """Fail fast when Ray Serve already listens elsewhere (its HTTP options are per cluster)."""
    from ray.serve.context import _get_global_client

    running = _get_global_client().http_config
    if (running.host, running.port) != (cfg.host, cfg.port):
        raise ConfigError(
            f"Ray Serve on this cluster already listens on {running.host}:{running.port}, not "
            f"{cfg.host}:{cfg.port}: use that serve.host/serve.port (with another app_name and "
            "route_prefix), or stop the other services first"
        )


def _metrics_name(app_name: str) -> str:
    return f"{app_name}-metrics"


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: start the service from a YAML config and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m nemo_genrm.serve", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--config", required=True, type=Path, help="YAML with judge: and serve: sections"
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. serve.port=8001")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    cfg = load_service_config(args.config, args.overrides)
    url = start_judge_service(cfg)
    logger.info("serving %r at %s (Ctrl-C stops)", cfg.model_id, url)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        logger.info("stopping the judge service")
    finally:
        stop_judge_service(cfg.serve.app_name)


if __name__ == "__main__":
    main()
