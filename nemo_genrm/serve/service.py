"""Serve a judge engine over an OpenAI-compatible HTTP API with Ray Serve.

Run it::

    uv run python -m nemo_genrm.serve --config examples/configs/serve_judge_tiny.yaml \\
        judge.model_name=/path/to/judge serve.port=8001

The YAML has a ``judge:`` section (:class:`nemo_genrm.config.JudgeConfig`, any backend) and a
``serve:`` section (:class:`nemo_genrm.serve.config.ServeConfig`). Point a trainer at the service with
``judge.backend: http`` and ``judge.http.base_url`` set to the URL this prints. The endpoints
and their rules are in :mod:`nemo_genrm.serve.app` and ``docs/serving.md``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nemo_genrm.config import ConfigError, load_config, validate
from nemo_genrm.errors import JudgeStartupError
from nemo_genrm.orphan_guard import ray_descendants, start_guard, stop_guard
from nemo_genrm.ray_env import actor_options, actor_runtime_env, ensure_ray, prepare_job_environment

# The config and the metrics live in modules of their own, which the Ray Serve application
# (serve.app) imports too: importing them from here would make the two modules import each other.
from nemo_genrm.serve.config import ServeConfig, ServiceConfig, deployment_name
from nemo_genrm.serve.metrics import LATENCY_WINDOW, MetricsStore, prometheus_text

__all__ = [
    "LATENCY_WINDOW",
    "METRICS_NAMESPACE",
    "MetricsStore",
    "ServeConfig",
    "ServiceConfig",
    "check_judge_loads",
    "check_replica_gpus",
    "load_service_config",
    "prometheus_text",
    "start_judge_service",
    "stop_judge_service",
    "wait_until_healthy",
]

logger = logging.getLogger(__name__)

METRICS_NAMESPACE = "nemo_genrm"
"""Ray namespace of the service's metrics actor."""


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
    return validate(ServiceConfig, load_config(path, overrides, schema=ServiceConfig))


def start_judge_service(config: ServiceConfig | dict[str, Any] | Any, *, wait: bool = True) -> str:
    """Deploy the judge service on the current Ray cluster.

    Starts Ray (locally) when it is not running. Clients connect to ``serve.host:serve.port``,
    the service's edge (:mod:`nemo_genrm.serve.edge`: header timeout, Ray Serve's own routes
    kept off the network), which forwards to Ray Serve's proxy on ``127.0.0.1``. That proxy is
    set once per cluster, so services on one cluster share it and use a different
    ``serve.app_name`` and ``serve.route_prefix``.

    Args:
        config: A :class:`ServiceConfig`, or a dict/DictConfig with ``judge`` and ``serve``.
        wait: Block until ``/health`` answers. With ``False`` the replicas start in the
            background (start several services at once, then :func:`wait_until_healthy`).

    Returns:
        The base URL for OpenAI clients and ``judge.http.base_url``, e.g.
        ``http://127.0.0.1:8000/v1`` (``.../<route_prefix>/v1`` with a prefix).

    Raises:
        ConfigError: The config is invalid, the API key's variable or file is unset or empty,
            the judge's tokenizer cannot be loaded, the replicas need more GPUs than the
            cluster has, or Ray Serve already listens on another host/port.
        JudgeStartupError: A Ray worker process started for the service (a replica, Serve's
            controller or proxy) exited before it connected, or Ray Serve could not deploy the
            application: raised as soon as it is known, with the worker's own error read from its
            node's Ray logs and what to check on the node (:mod:`nemo_genrm.serve.startup`).
        TimeoutError: ``/health`` did not answer within ``serve.startup_timeout_s``; says what
            each replica still waits for.
    """
    import ray
    from ray.serve.api import RunTarget, run_many

    from nemo_genrm.judges.worker_logs import WorkerStartWatch
    from nemo_genrm.serve.app import JudgeDeployment
    from nemo_genrm.serve.edge import start_edges
    from nemo_genrm.serve.guard import key_digest, load_api_key
    from nemo_genrm.serve.startup import job_environment_check, wait_for_service

    cfg = validate(ServiceConfig, config)
    try:
        api_key = load_api_key(cfg.serve.api_key_env, cfg.serve.api_key_file)
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    # Replicas get the key's digest only: the key itself never enters Ray (actor arguments,
    # dashboards, logs).
    digest = key_digest(api_key) if api_key is not None else None
    check_judge_loads(cfg)  # before Ray: a replica that cannot load its judge fails noisily, retried
    ensure_ray()
    check_replica_gpus(cfg)
    if cfg.in_replica and cfg.serve.num_gpus_per_replica == 0 and ray.cluster_resources().get("GPU", 0) > 0:
        logger.warning(
            "the judge engine runs inside replicas that reserve no GPU, so it runs on CPU: set "
            "serve.num_gpus_per_replica: 1 (or serve.engine_in_replica: false)"
        )
    watch = WorkerStartWatch()  # from here on, a worker that dies before it connects is reported
    # Serve's own actors use the job's environment: built first, within the start-up bound.
    prepare_job_environment(cfg.serve.startup_timeout_s, while_waiting=job_environment_check(cfg, watch))
    _start_serve(cfg.serve)
    proxy_port = _check_proxy(cfg.serve)
    start_edges(
        cfg.serve.host,
        cfg.serve.port,
        proxy_port,
        cfg.serve.header_timeout_s,
        cfg.serve.proxy_location,
        METRICS_NAMESPACE,
    )
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
        name=deployment_name(cfg.serve.app_name),
        num_replicas=cfg.serve.num_replicas,
        # Ray Serve counts a request from its headers on; the engine's own slots
        # (serve.max_ongoing_requests) are taken inside the replica once the body is in.
        max_ongoing_requests=cfg.serve.max_open_requests,
        ray_actor_options=replica_actor_options(cfg.serve),
        health_check_period_s=cfg.serve.health_check_period_s,
        health_check_timeout_s=cfg.serve.health_check_timeout_s,
        **({"max_replicas_per_node": cfg.serve.max_replicas_per_node} if cfg.serve.max_replicas_per_node else {}),
    )
    target = RunTarget(
        target=deployment.bind(cfg.model_dump(), metrics, digest),
        name=cfg.serve.app_name,
        route_prefix=cfg.serve.route_prefix,
    )
    # Not Serve's own wait: it waits as long as Ray retries a worker that cannot start.
    run_many([target], wait_for_ingress_deployment_creation=False, wait_for_applications_running=False)
    host = "127.0.0.1" if cfg.serve.host in ("0.0.0.0", "::") else cfg.serve.host
    url = f"http://{host}:{cfg.serve.port}{cfg.serve.route_prefix.rstrip('/')}/v1"
    if wait:
        try:
            wait_for_service(url, cfg, watch, cfg.serve.startup_timeout_s)
        except BaseException:
            stop_judge_service(cfg.serve.app_name)  # nothing left retrying a replica that cannot start
            raise
        logger.info("judge service %r for model %r at %s", cfg.serve.app_name, cfg.model_id, url)
    return url


def check_judge_loads(cfg: ServiceConfig) -> None:
    """Load the judge's tokenizer here, before any replica starts.

    Every replica loads it, and a Ray Serve replica whose constructor fails is retried and
    logged at length before the deployment fails; a name that points nowhere is reported here
    as one error naming the setting.

    Raises:
        ConfigError: The tokenizer cannot be loaded (``judge.model_name`` or ``judge.tokenizer``).
    """
    if cfg.judge.backend == "http" and not cfg.judge.tokenizer:
        return
    from nemo_genrm.judges.fitting import load_tokenizer

    load_tokenizer(cfg.judge.tokenizer_name, setting="judge.tokenizer" if cfg.judge.tokenizer else "judge.model_name")


def check_replica_gpus(cfg: ServiceConfig) -> None:
    """Check that the connected Ray cluster has the GPUs the replicas reserve.

    Raises:
        ConfigError: ``serve.num_replicas x num_gpus_per_replica`` is more than the cluster has
            (Ray Serve would wait for them until ``serve.startup_timeout_s``).
    """
    import ray

    need = cfg.serve.num_replicas * cfg.serve.num_gpus_per_replica
    have = ray.cluster_resources().get("GPU", 0.0)
    if need > have + 1e-6:
        raise ConfigError(
            [
                f"the service's replicas need {need:g} GPUs (serve.num_replicas {cfg.serve.num_replicas} x "
                f"num_gpus_per_replica {cfg.serve.num_gpus_per_replica:g}) but the Ray cluster has {have:g}: "
                "lower serve.num_replicas or serve.num_gpus_per_replica, or add GPUs"
            ]
        )


def wait_until_healthy(url: str, timeout_s: float = 600.0) -> None:
    """Poll ``<url without /v1>/health`` until it answers 200.

    Args:
        url: The base URL :func:`start_judge_service` returned.
        timeout_s: Longest wait.

    Raises:
        TimeoutError: No 200 within ``timeout_s``.
    """
    from nemo_genrm.serve.startup import answers, health_url

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        ok, last = answers(url)
        if ok:
            return
        time.sleep(0.2)
    raise TimeoutError(f"judge service did not become healthy at {health_url(url)} within {timeout_s:.0f} s: {last}")


def stop_judge_service(app_name: str = "genrm-judge") -> None:
    """Delete one service and its metrics actor; shut Ray Serve down when no service is left.

    Safe to call twice.

    Args:
        app_name: ``serve.app_name`` of the service.
    """
    import ray
    from ray import serve

    from nemo_genrm.serve.edge import stop_edges

    if not ray.is_initialized():
        return
    try:
        serve.delete(app_name)
        remaining = serve.status().applications
    except Exception as exc:  # Serve already shut down
        logger.debug("serve.delete(%r): %s", app_name, exc)
        remaining = {}
    try:
        if not remaining:
            serve.shutdown()
            stop_edges(None, None, METRICS_NAMESPACE)
        ray.kill(ray.get_actor(_metrics_name(app_name), namespace=METRICS_NAMESPACE))
    except ValueError:  # no such actor: already stopped
        pass
    except Exception as exc:  # noqa: BLE001 - the cluster is going or gone (a signal to the process group)
        logger.warning("stopping the judge service %r: %s", app_name, str(exc).splitlines()[0] if str(exc) else exc)


def _start_serve(cfg: ServeConfig) -> None:
    """Start Ray Serve (or connect to it), its proxy on loopback only, behind the edge.

    Serve's controller checks a new proxy every 5 s and replaces one not ready after three
    checks; on a loaded machine a proxy's worker can take longer to start, and ``serve.start``
    then raises for the proxy it was waiting on although its replacement is on the way. The
    controller is up by then: Serve is joined, and the proxy's readiness is waited for with the
    rest of the start-up (``serve.startup_timeout_s``).
    """
    import ray
    from ray import serve

    from nemo_genrm.judges.ray_hosts import free_port

    options = {
        "proxy_location": cfg.proxy_location,
        "http_options": {"host": "127.0.0.1", "port": cfg.proxy_port or free_port()},
    }
    try:
        serve.start(**options)
    except ray.exceptions.RayActorError as exc:
        logger.warning(
            "Ray Serve replaced its HTTP proxy while it started (%s); waiting for the new one", str(exc).splitlines()[0]
        )
        serve.start(**options)


def _check_proxy(cfg: ServeConfig) -> int:
    """Ray Serve's proxy port on this cluster; fail fast when Serve listens otherwise.

    Its HTTP options are set once per cluster: a Serve started before (by another service, or
    by hand) must listen on loopback, behind the edges, on ``serve.proxy_port`` when one is set.
    """
    from ray.serve.context import _get_global_client

    running = _get_global_client().http_config
    if running.host != "127.0.0.1" or (cfg.proxy_port is not None and running.port != cfg.proxy_port):
        raise ConfigError(
            f"Ray Serve on this cluster already listens on {running.host}:{running.port}; the judge service "
            f"needs its proxy on 127.0.0.1{f':{cfg.proxy_port}' if cfg.proxy_port else ''} behind its edge: "
            "stop the other Serve applications (serve.shutdown()) first, or leave serve.proxy_port unset"
        )
    return int(running.port)


def replica_actor_options(serve_cfg: ServeConfig) -> dict[str, Any]:
    """Ray options of each replica: its CPUs, GPUs, custom resources and node label selector."""
    options: dict[str, Any] = {
        "num_cpus": serve_cfg.num_cpus_per_replica,
        "num_gpus": serve_cfg.num_gpus_per_replica,
    }
    if serve_cfg.custom_resources:
        options["resources"] = dict(serve_cfg.custom_resources)
    if serve_cfg.node_labels:
        options["label_selector"] = dict(serve_cfg.node_labels)
    return actor_options(options)


def _metrics_name(app_name: str) -> str:
    return f"{app_name}-metrics"


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: start the service from a YAML config and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m nemo_genrm.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path, help="YAML with judge: and serve: sections")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. serve.port=8001")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg: ServiceConfig | None = None
    error = None
    start_guard()  # a `uv run` killed at any moment takes this process and all it started with it
    _stop_on_sigterm()
    try:
        cfg = load_service_config(args.config, args.overrides)
        url = start_judge_service(cfg)
        _stop_on_sigterm()  # again: ray.init installs a SIGTERM handler of its own
        logger.info("serving %r at %s (Ctrl-C or SIGTERM stops)", cfg.model_id, url)
        while True:
            time.sleep(1.0)
    except (ConfigError, JudgeStartupError, TimeoutError) as exc:  # the cause and its fix, not a traceback
        error = f"error: {exc}"
    except KeyboardInterrupt:
        logger.info("stopping the judge service")
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # the teardown runs to its end
            signal.signal(signum, signal.SIG_IGN)
        # On a cluster of its own the service goes with the cluster, at once; on a shared one
        # (RAY_ADDRESS) only the service is deleted.
        if cfg is not None and not ray_descendants(os.getpid()):
            stop_judge_service(cfg.serve.app_name)
        _shutdown_ray()
    if error is not None:
        sys.exit(error)


def _stop_on_sigterm() -> None:
    """SIGTERM stops the service as Ctrl-C does (a process manager's stop, ``kill``)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _shutdown_ray() -> None:
    """Stop the Ray cluster the CLI started, and its guard's sweep of what Ray leaves for seconds."""
    import ray

    try:
        ray.shutdown()
    except Exception as exc:  # noqa: BLE001 - the cluster is gone already
        logger.warning("ray.shutdown: %s", exc)
    stop_guard()


if __name__ == "__main__":
    main()
