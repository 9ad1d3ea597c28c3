"""Starting the environment actor from the driver, and the start-up error the actor keeps.

A mistake reaches the driver as one typed error that says what to change, not as a dead actor:

- In the driver, :class:`EnvironmentLauncher` is ``GenRMEnvironment``. ``start(cfg)`` validates
  the config before Ray starts, checks a separate judge's layout against the cluster, creates
  the actor and waits until its judge is up; a failure to start is raised there as the
  package's own exception (:data:`STARTUP_ERRORS`), not wrapped in Ray's. ``remote(cfg)`` and
  ``options(...).remote(cfg)``, which NeMo-RL's ``create_env`` calls, validate and check the
  same before creating the actor, and return at once as Ray's do.
- In the actor, :func:`keep_start_error`: when the judge fails to start, the constructor
  returns instead of raising. A threaded Ray actor whose constructor raises is torn down with
  Ray's C++ ``Stack trace`` and ``Fatal Python error: Aborted`` printed after the error (seen
  with Ray 2.60 on every such actor: the teardown of its thread pool in ``~CoreWorker``
  aborts). The actor keeps the error and raises it from every method call but ``shutdown``
  (there is nothing to release), so the caller's ``ray.get`` raises it typed: Ray's
  ``RayTaskError`` wrapper is an instance of the error's class, and the package's errors
  pickle whole (:mod:`nemo_genrm.errors`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from typing import Any, TypeVar

from nemo_genrm.config import GenRMConfig, validate
from nemo_genrm.errors import ConfigError, JudgeStartupError, JudgeUnavailableError
from nemo_genrm.judges.placement import ClusterView, plan_separate, separate_problems
from nemo_genrm.ray_env import ensure_ray

logger = logging.getLogger(__name__)

__all__ = ["STARTUP_ERRORS", "EnvironmentLauncher", "check_layout", "keep_start_error"]

STARTUP_ERRORS = (ConfigError, JudgeStartupError, JudgeUnavailableError)
"""The package's own start-up failures: their message is the whole story, so they travel
without the constructor's traceback and ``start`` raises them unwrapped."""

T = TypeVar("T")


# ------------------------------------------------------------------------------- actor side
def keep_start_error(cls: type[T]) -> type[T]:
    """Make an actor body keep its constructor's error and raise it from every call.

    The class gains ``ready()`` (``True`` once started, else the error); its public methods
    raise the kept error before running; ``shutdown()`` does nothing after a failed start.

    Args:
        cls: The actor body (a plain class, before ``ray.remote``).

    Returns:
        ``cls``, changed in place.
    """
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        self._start_error = None
        try:
            init(self, *args, **kwargs)
        except Exception as exc:  # kept and raised by every call: the actor must not die here
            self._start_error = _kept(exc)
            logger.warning("%s: start-up failed (%s); its next call raises the error", cls.__name__, type(exc).__name__)

    cls.__init__ = __init__  # type: ignore[misc]
    for name in dir(cls):
        member = inspect.getattr_static(cls, name)
        if not name.startswith("_") and name not in ("ready", "shutdown") and inspect.isfunction(member):
            setattr(cls, name, _guarded(member))
    cls.ready = _ready  # type: ignore[attr-defined]
    cls.shutdown = _unless_failed(cls.shutdown)  # type: ignore[attr-defined]
    return cls


def _kept(exc: Exception) -> tuple[Exception, Any]:
    """The error and the traceback to raise it with: none for the package's own errors."""
    if isinstance(exc, STARTUP_ERRORS):
        exc.__cause__, exc.__context__, exc.__suppress_context__ = None, None, True
        return exc, None
    return exc, exc.__traceback__  # an unexpected failure keeps where it happened


# Each wrapper raises the kept error itself (no helper frame): the traceback the caller sees
# is one frame long for the package's own errors.
def _ready(self: Any) -> bool:
    """``True`` once the judge is up; raises the error that stopped it otherwise."""
    if self._start_error is not None:
        raise self._start_error[0].with_traceback(self._start_error[1])
    return True


def _guarded(method: Any) -> Any:
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def guarded_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self._start_error is not None:
                raise self._start_error[0].with_traceback(self._start_error[1])
            return await method(self, *args, **kwargs)

        return guarded_async

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._start_error is not None:
            raise self._start_error[0].with_traceback(self._start_error[1])
        return method(self, *args, **kwargs)

    return guarded


def _unless_failed(shutdown: Any) -> Any:
    @functools.wraps(shutdown)
    def guarded_shutdown(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "_start_error", None) is not None:
            return None  # the failed start released what it held; NeMo-RL's teardown calls this
        return shutdown(self, *args, **kwargs)

    return guarded_shutdown


# ------------------------------------------------------------------------------ driver side
def check_layout(cfg: GenRMConfig) -> None:
    """Check each separate judge's layout against the connected Ray cluster, in the driver.

    The actor checks it again when it reserves the resources; checking here first reports a
    GPU count the cluster cannot give before any actor starts. Colocated judges are checked
    by the actor (the group they join may not exist yet); nothing is checked when Ray is not
    connected.

    Raises:
        ConfigError: Every layout problem at once, each saying what to change.
    """
    import ray

    if not ray.is_initialized() or cfg.resources.placement != "separate":
        return
    cluster = ClusterView.current()
    problems: list[str] = []
    for judge in (cfg.judge, *cfg.reward.judges):
        if judge.backend == "http":
            continue
        for line in separate_problems(judge, cfg.resources, plan_separate(judge, cfg.resources), cluster):
            if line not in problems:
                problems.append(line)
    if problems:
        raise ConfigError(problems, source="env.genrm.resources")


class _Launch:
    """``GenRMEnvironment.options(...)``: Ray actor options, then ``remote`` or ``start``."""

    def __init__(self, actor_class: Any, options: dict[str, Any]):
        self._actor_class = actor_class
        self._options = options

    def remote(self, cfg: Any, *args: Any, **kwargs: Any) -> Any:
        """Validate ``cfg`` and check its layout here, then create the actor (not waiting for it).

        Raises:
            ConfigError: The config is invalid, or a separate judge's layout does not fit the
                cluster.
        """
        try:
            config = validate(GenRMConfig, cfg, prefix="env.genrm")  # before Ray: a typo costs no cluster
            ensure_ray()
            check_layout(config)
        except ConfigError as exc:  # the user's mistake: its message, not the package's frames
            raise exc.with_traceback(None) from None
        return self._actor_class.options(**self._options).remote(config, *args, **kwargs)

    def start(self, cfg: Any, **kwargs: Any) -> Any:
        """Create the actor as :meth:`remote` does and wait until its judge is up.

        Raises:
            ConfigError: Invalid config, a layout the cluster cannot give, a judge model or
                tokenizer that cannot be loaded, or resources not scheduled within
                ``fault_tolerance.startup_timeout_s``.
            JudgeStartupError: The judge's workers did not start (which, and why), or the
                environment actor itself was not scheduled within ``startup_timeout_s``.
        """
        import ray

        try:
            config = validate(GenRMConfig, cfg, prefix="env.genrm")
            handle = self.remote(config, **kwargs)
        except ConfigError as exc:
            raise exc.with_traceback(None) from None
        try:
            self._wait_ready(handle, config.fault_tolerance.startup_timeout_s)
        except BaseException as exc:  # Ctrl-C included: no actor is left behind
            ray.kill(handle)
            cause = getattr(exc, "cause", None)
            if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(cause, STARTUP_ERRORS):
                raise cause.with_traceback(None) from None  # the package's message, not Ray's wrapper
            if isinstance(exc, STARTUP_ERRORS):
                raise exc.with_traceback(None) from None
            raise
        return handle

    def _wait_ready(self, handle: Any, timeout_s: float) -> None:
        """Wait for ``ready()``; an actor Ray has not placed within ``timeout_s`` is an error.

        Loading the judge may take longer than ``timeout_s`` (its own stages are bounded in the
        actor); only an actor still waiting for resources past it is given up on.
        """
        import ray

        from nemo_genrm.judges.ray_hosts import describe_pending_actor

        ref = handle.ready.remote()
        deadline = time.monotonic() + timeout_s
        while not ray.wait([ref], timeout=1.0)[0]:
            if time.monotonic() > deadline and _actor_state(handle) == "PENDING_CREATION":
                raise JudgeStartupError(
                    [
                        "the GenRM environment actor was not scheduled within fault_tolerance.startup_timeout_s "
                        f"({timeout_s:g} s): {describe_pending_actor(handle, self._options)}"
                    ]
                )
        ray.get(ref)


def _actor_state(handle: Any) -> str:
    """Ray's state of an actor (``PENDING_CREATION``, ``ALIVE``, ...), from the GCS record."""
    import ray

    try:
        return ray._private.state.actors(handle._actor_id.hex()).get("State", "unknown")
    except Exception:  # noqa: BLE001 - diagnostics only
        return "unknown"


class EnvironmentLauncher:
    """``GenRMEnvironment``: the environment's Ray actor class, checked in the driver.

    ``GenRMEnvironment.start(cfg)`` is the way to start it from a script; ``remote`` and
    ``options`` behave as Ray's (NeMo-RL's ``create_env`` calls
    ``options(runtime_env=...).remote(cfg)``) with the config checked first. Every other
    attribute is the Ray actor class's.

    Args:
        actor_class: The Ray actor class (``ray.remote`` of a :func:`keep_start_error` body).
    """

    def __init__(self, actor_class: Any):
        self.actor_class = actor_class

    def options(self, **options: Any) -> _Launch:
        """Ray actor options (``num_cpus``, ``runtime_env``, ...) for ``remote`` or ``start``."""
        return _Launch(self.actor_class, options)

    def remote(self, cfg: Any, *args: Any, **kwargs: Any) -> Any:
        """See :meth:`_Launch.remote`."""
        try:
            return self.options().remote(cfg, *args, **kwargs)
        except ConfigError as exc:  # raised from here: the caller's frame and this one, no more
            raise exc.with_traceback(None) from None

    def start(self, cfg: Any, **kwargs: Any) -> Any:
        """Start the environment and wait until its judge is up (see :meth:`_Launch.start`).

        Args:
            cfg: The ``env.genrm`` section (dict, DictConfig or :class:`GenRMConfig`).
            **kwargs: The actor's other arguments (``placement_group``,
                ``policy_gpu_fraction``).

        Returns:
            The actor handle.
        """
        try:
            return self.options().start(cfg, **kwargs)
        except STARTUP_ERRORS as exc:  # raised from here: the caller's frame and this one, no more
            raise exc.with_traceback(None) from None

    def __getattr__(self, name: str) -> Any:
        if name == "actor_class":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.actor_class, name)

    def __repr__(self) -> str:
        return f"GenRMEnvironment(Ray actor class {self.actor_class.__ray_metadata__.class_name})"
