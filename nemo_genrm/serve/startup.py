"""Waiting for the judge service to answer, or saying why its replicas did not start.

Ray Serve waits for a replica whose Ray worker process cannot start (its interpreter missing or
broken on the node, a ``uv run`` that cannot build its environment, an import failing at start)
as long as Ray retries it, minutes, and Ray then names no cause ("worker startup repeatedly
failed"). :func:`wait_for_service` waits until Ray Serve runs every replica and ``/health``
answers 200, and meanwhile:

- raises :class:`~nemo_genrm.errors.JudgeStartupError` as soon as a Ray worker process started
  for the service exits before it connects, with the worker's own error read from its node's
  logs (:class:`~nemo_genrm.judges.worker_logs.WorkerStartWatch`) and what to check on the node;
- raises it too when Ray Serve reports the application failed to deploy (a replica's
  constructor raised), with Serve's message;
- past ``serve.startup_timeout_s``, raises :class:`TimeoutError` saying what each replica still
  waits for (Ray's state, its node) and the node's ``raylet.err`` where it can be read.
"""

from __future__ import annotations

import logging
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from nemo_genrm.errors import JudgeStartupError
from nemo_genrm.judges.worker_logs import WorkerStartFailure, WorkerStartWatch, remote_raylet_errors
from nemo_genrm.serve.config import ServiceConfig, deployment_name

__all__ = ["health_url", "startup_failure", "wait_for_service"]

logger = logging.getLogger(__name__)

POLL_S = 0.5
"""How often the start-up is checked."""


def health_url(url: str) -> str:
    """``/health`` of the service whose OpenAI base URL is ``url``."""
    return url.removesuffix("/").removesuffix("/v1") + "/health"


def answers(url: str) -> tuple[bool, Exception | None]:
    """Whether ``/health`` answers 200 now, and the error when it does not."""
    try:
        with urllib.request.urlopen(health_url(url), timeout=5) as response:
            return response.status == 200, None
    except OSError as exc:  # proxy not listening yet, or routes not ready (404/503)
        return False, exc


def wait_for_service(url: str, cfg: ServiceConfig, watch: WorkerStartWatch, timeout_s: float) -> None:
    """Wait until every replica runs and ``/health`` answers 200, or raise why not (module docstring).

    Raises:
        JudgeStartupError: A Ray worker process of the service exited before it connected, or
            Ray Serve could not deploy the application.
        TimeoutError: No 200 within ``timeout_s``; says what each replica waits for.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        app = _application(cfg.serve.app_name)
        running = app is not None and str(getattr(app.status, "value", app.status)) == "RUNNING"
        ok, last = answers(url) if running else (False, None)  # every replica up, then /health
        if ok:
            return
        if (failed := startup_failure(cfg, watch, app)) is not None:
            raise failed
        if time.monotonic() >= deadline:
            waiting = "; ".join(_waiting(cfg, app) or ["no replica reported"])
            raise TimeoutError(
                f"judge service did not become healthy at {health_url(url)} within {timeout_s:g} s "
                f"(serve.startup_timeout_s): {last or 'not every replica is running'}; {waiting}"
            )
        time.sleep(POLL_S)


def startup_failure(cfg: ServiceConfig, watch: WorkerStartWatch, app: Any) -> JudgeStartupError | None:
    """Why the service cannot start, if Ray Serve (``app``: its status) or a worker's node already
    says so; else ``None``."""
    problems = []
    if app is not None and str(getattr(app.status, "value", app.status)) == "DEPLOY_FAILED":
        problems.append(f"Ray Serve could not deploy the application {cfg.serve.app_name!r}: {app.message}")
    failures = watch.failures()
    if failures:
        problems += [describe_failure(failure) for failure in failures] + [what_to_check(cfg)]
    return JudgeStartupError(problems) if problems else None


def job_environment_check(cfg: ServiceConfig, watch: WorkerStartWatch) -> Callable[[], None]:
    """What :func:`nemo_genrm.ray_env.prepare_job_environment` runs while it waits."""

    def check() -> None:
        failures = watch.failures()
        if failures:
            raise JudgeStartupError([describe_failure(f) for f in failures] + [what_to_check(cfg)])

    return check


def describe_failure(failure: WorkerStartFailure) -> str:
    """One problem line: the node, the worker process, and its own error."""
    error = "\n      ".join(failure.error.splitlines()) if failure.error else "(it wrote nothing)"
    return (
        f"a Ray worker process (pid {failure.pid}) started for the service on node {_node_name(failure.node_id)} "
        f"exited before it connected to Ray (Ray would retry it for minutes); its own error, from "
        f"{failure.log}:\n      {error}"
    )


def what_to_check(cfg: ServiceConfig) -> str:
    """What every node that may run a replica (or Serve's proxy) needs, for an error message."""
    import ray

    job_env = ray.get_runtime_context().runtime_env or {}
    where = f"the nodes labelled {cfg.serve.node_labels}" if cfg.serve.node_labels else "every node"
    checks = [
        f"the replicas' interpreter {sys.executable} exists and runs (`{sys.executable} -c 'import nemo_genrm, ray'`)"
    ]
    if job_env.get("working_dir"):
        checks.append(f"the job's working directory {str(job_env['working_dir']).removeprefix('local://')} exists")
    if str(job_env.get("py_executable") or "") and job_env.get("py_executable") != sys.executable:
        checks.append(
            f"the job's interpreter command `{job_env['py_executable']}` (Ray Serve's controller "
            "and proxies run on it) works from that folder"
        )
    return (
        f"check on {where}: " + "; ".join(checks) + "; and that node's Ray logs (raylet.err, raylet.out "
        "in its session's logs folder, e.g. /tmp/ray/session_latest/logs); docs/scale_out.md lists what the "
        "service needs on every node"
    )


def _application(app_name: str) -> Any:
    from ray import serve

    try:
        return serve.status().applications.get(app_name)
    except Exception:  # noqa: BLE001 - the controller is starting: nothing to say yet
        return None


def _waiting(cfg: ServiceConfig, app: Any) -> list[str]:
    """What each replica not running waits for: Ray's state, its node, and that node's raylet.err."""
    from ray._private.state import actors

    said = [f"Ray Serve says: {app.message}"] if app is not None and app.message else []
    class_name = f"ServeReplica:{cfg.serve.app_name}:{deployment_name(cfg.serve.app_name)}"
    try:
        records = [a for a in actors().values() if a["ActorClassName"] == class_name and a["State"] != "ALIVE"]
    except Exception:  # noqa: BLE001 - diagnostics only
        return said
    for record in records:
        node = record.get("Address", {}).get("NodeID") or ""
        line = f"a replica is {record['State']}" + (f" on node {_node_name(node)}" if node else "")
        if record.get("DeathCause"):
            line += f" ({record['DeathCause']})"
        if node and record["State"] != "DEAD" and (errors := remote_raylet_errors(node)):
            line += ", whose raylet.err ends:\n      " + "\n      ".join(errors.splitlines())
        said.append(line)
    return said


def _node_name(node_id: str) -> str:
    """``<ip> (<id prefix>, labels)`` of a node, for a message."""
    import ray

    try:
        node = next((n for n in ray.nodes() if n["NodeID"] == node_id), None)
    except Exception:  # noqa: BLE001 - diagnostics only
        node = None
    if node is None:
        return node_id[:12]
    labels = {k: v for k, v in (node.get("Labels") or {}).items() if not k.startswith("ray.io/")}
    return f"{node.get('NodeManagerAddress', '?')} ({node_id[:12]}" + (f", labels {labels})" if labels else ")")
