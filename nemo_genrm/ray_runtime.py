"""The runtime environments of the Ray job and of every Ray actor this package starts.

Ray starts an actor's worker process with the job's runtime environment unless the actor names
its own. When the driver runs under ``uv run``, Ray's ``uv run`` hook
(``ray/_private/runtime_env/uv_runtime_env_hook.py``) makes the job's ``py_executable`` a
fresh ``uv run`` and, unless the job names a working directory, makes the current folder the
job's working directory: Ray packs and uploads it (its packaging lines for ``.gitignore``,
``.venv`` ...), and the hook refuses to start when the uv project (``--project``, or the
``pyproject.toml`` found above the folder) is not inside that folder, so ``uv run --project
<checkout> script.py`` from an experiment folder stopped at ``ray.init``.

The package's actors run on the interpreter the driver runs, ``sys.executable``, where the
package is installed, as NeMo-RL starts its own actors (:func:`actor_runtime_env`): they need
no copy of any folder. The job is started or joined with :func:`job_runtime_env`, which names
the driver's own folder as a ``local://`` working directory under ``uv run``: Ray uses it in
place (nothing packed, uploaded or printed), the hook checks only plain paths, and the job's
``uv run`` workers (Ray Serve's controller and proxies, which take no interpreter of their own)
start where the driver did and find the same project and environment. Like the interpreter,
that folder must exist on every node that runs an actor. No Ray environment variable is needed.

Ray replaces an actor's ``runtime_env`` as a whole when ``.options(runtime_env=...)`` names one
(it does not merge it with the class default), so code that passes its own runtime environment
builds it with :func:`actor_runtime_env`.

Where the package starts Ray itself (:func:`ensure_ray`: ``GenRMEnvironment.start``, the judges,
the service), Ray's driver-side messages go through the application's own logging
configuration, as the package's do: a script that configures no logging sees Ray's warnings
only, not its INFO lines about starting a cluster and packaging the working directory.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from nemo_genrm.orphan_guard import ray_descendants, start_guard

logger = logging.getLogger(__name__)

_START_ATTEMPTS = 3


def actor_runtime_env(runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A runtime environment that runs the actor on the driver's interpreter.

    Args:
        runtime_env: The caller's runtime environment, if any; its keys win (a caller that names
            its own ``py_executable`` keeps it), its ``env_vars`` are kept.

    Returns:
        A new dict: ``{"py_executable": sys.executable, **runtime_env}``.
    """
    merged: dict[str, Any] = {"py_executable": sys.executable}
    merged.update(copy.deepcopy(dict(runtime_env or {})))
    return merged


def job_runtime_env(runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The runtime environment to start or join a Ray cluster with: ``ray.init(runtime_env=...)``.

    Under ``uv run`` (Ray's ``uv run`` hook active) and without a ``working_dir`` of the
    caller's, the job's working directory is ``local://<current folder>``: used where it is,
    never uploaded, and accepted wherever the uv project lives (see the module docstring).
    Elsewhere the caller's environment is returned unchanged.

    Args:
        runtime_env: The caller's job runtime environment, if any (a ``working_dir`` in it is kept).

    Returns:
        A new dict for ``ray.init(runtime_env=...)``.
    """
    merged = copy.deepcopy(dict(runtime_env or {}))
    if "working_dir" not in merged and _uv_run_hook_active():
        merged["working_dir"] = f"local://{os.getcwd()}"
    return merged


def _uv_run_hook_active() -> bool:
    """Whether ``ray.init`` in this process will apply Ray's ``uv run`` hook (Ray's own test)."""
    try:
        from ray._private import ray_constants
        from ray._private.runtime_env.uv_runtime_env_hook import _get_uv_run_cmdline
    except ImportError:  # a Ray without the hook
        return False
    return bool(ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV and _get_uv_run_cmdline())


def actor_options(options: Mapping[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    """Ray actor options with :func:`actor_runtime_env` merged into their ``runtime_env``.

    Args:
        options: Actor options (``num_cpus``, ``scheduling_strategy``, ``runtime_env`` ...).
        **more: Further options, winning over ``options``.

    Returns:
        A new dict for ``ActorClass.options(**...)`` (or ``ray_actor_options`` of a Serve
        deployment).
    """
    merged = {**dict(options or {}), **more}
    merged["runtime_env"] = actor_runtime_env(merged.get("runtime_env"))
    return merged


def ensure_ray(**options: Any) -> bool:
    """Connect this process to Ray unless it already is; return whether this call connected.

    Ray's own rules pick the cluster, as for ``ray.init()``: ``RAY_ADDRESS`` or a cluster started
    with ``ray start`` on this machine is joined, else a local one is started. Ray's driver-side
    log lines go through the application's logging (``configure_logging=False``) instead of a
    handler of Ray's own; the workers' output still reaches this terminal. The job's runtime
    environment goes through :func:`job_runtime_env`, so a driver under ``uv run`` works from any
    folder and uploads nothing. A local node that misses Ray's fixed 30 s start-up window (a busy
    machine) is started again, three times at most. A cluster this call starts (not one it joins) gets a guard process
    (:mod:`nemo_genrm.orphan_guard`) that stops all of it within seconds once this process, or
    the ``uv run`` that started it, is gone, however it ended.

    Args:
        **options: Further ``ray.init`` options (they win; a ``runtime_env`` among them is kept
            and completed by :func:`job_runtime_env`).
    """
    import ray

    if ray.is_initialized():
        return False
    logger.info("Ray is not initialised: starting or joining a cluster")
    options["runtime_env"] = job_runtime_env(options.get("runtime_env"))
    for attempt in range(1, _START_ATTEMPTS + 1):
        try:
            ray.init(**{"configure_logging": False, **options})
            break
        except Exception as exc:  # Ray raises a bare Exception when its node does not come up
            if attempt == _START_ATTEMPTS or "timed out during startup" not in str(exc):
                raise
            # On a busy machine a new node can miss Ray's fixed 30 s start-up window.
            logger.warning("Ray's node did not start in time (%s); trying again", exc)
            ray.shutdown()
    if ray_descendants(os.getpid()):  # a cluster of this process's own, not one it joined
        start_guard()
    return True


def job_uses_uv_run() -> bool:
    """Whether Ray's ``uv run`` hook set this job's interpreter (the driver runs under ``uv run``).

    The hook writes the ``uv`` its driver was started with, a bare ``uv`` or a path to it
    (``/root/.pyenv/shims/uv``, ``~/.local/bin/uv``). Requires a connected Ray driver.
    """
    import ray

    job_env = ray.get_runtime_context().runtime_env or {}
    words = str(job_env.get("py_executable") or "").split()
    return len(words) > 1 and os.path.basename(words[0]) == "uv" and words[1] == "run"


def prepare_job_environment(timeout_s: float, while_waiting: Callable[[], None] | None = None) -> None:
    """Build the job's own worker environment now, for actors this package cannot place itself.

    Ray Serve starts its controller and HTTP proxies with the job's runtime environment (it
    accepts no interpreter for them). Under ``uv run`` that environment is a ``uv run`` that the
    first such worker runs (syncing the project's environment, or building one when the job
    names a working directory of its own), and Ray kills a worker that has not connected 60 s
    after its start. One no-op task with the job's environment builds it first, with the
    caller's (configurable) start-up bound; later workers find it built. Nothing happens when
    the driver does not run under ``uv run``.

    Args:
        timeout_s: Longest wait for that environment.
        while_waiting: Called about twice a second while waiting; what it raises ends the wait
            (the service raises the error of a worker that could not start).

    Raises:
        TimeoutError: It was not ready within ``timeout_s``; the message says what was waited for.
    """
    import ray

    if not job_uses_uv_run():
        return
    logger.info("preparing Ray's `uv run` worker environment for Ray Serve's own actors (first use builds it)")
    ref = ray.remote(num_cpus=0)(_ready).remote()
    deadline = time.monotonic() + timeout_s
    try:
        while not ray.wait([ref], timeout=min(0.5, max(0.0, deadline - time.monotonic())))[0]:
            if while_waiting is not None:
                while_waiting()
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"Ray's `uv run` worker environment (used by Ray Serve's controller and proxies when the "
                    f"driver runs under `uv run`) was not ready within {timeout_s:g} s; raise "
                    "serve.startup_timeout_s, or run the driver with the virtual environment's python"
                )
    except BaseException:
        ray.cancel(ref, force=True)
        raise
    ray.get(ref)


def _ready() -> bool:
    return True
