"""Starting the environment actor from the driver, and the start-up error the actor keeps.

A mistake reaches the driver as one typed error that says what to change, not as a dead actor:

- In the driver, :class:`EnvironmentLauncher` is ``GenRMEnvironment``. ``start(cfg)`` validates
  the config before Ray starts, makes every check it can before the actor exists
  (:func:`preflight`: the judges' folders and tokenizers, their context's room for an answer,
  the layout against the cluster, a colocated judge's group), creates the actor and waits until
  its judge is up; a failure to start is raised there as the package's own exception
  (:data:`STARTUP_ERRORS`), not wrapped in Ray's. ``remote(cfg)`` and
  ``options(...).remote(cfg)``, which NeMo-RL's ``create_env`` calls, validate and check the
  same before creating the actor, and return at once as Ray's do: what only the actor can see
  (workers that fail while the judge loads) reaches the caller at its first call, or through
  :func:`wait_ready`. Every actor created is remembered (:func:`started_environments`).
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
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from nemo_genrm.config import GenRMConfig, validate
from nemo_genrm.errors import ConfigError, JudgeStartupError, JudgeUnavailableError
from nemo_genrm.judges.placement import (
    COLOCATED_UNDER_NEMO_RL,
    ClusterView,
    colocated_group,
    plan_separate,
    separate_problems,
)
from nemo_genrm.ray_runtime import ensure_ray

logger = logging.getLogger(__name__)

__all__ = [
    "COLOCATED_UNDER_NEMO_RL",
    "STARTUP_ERRORS",
    "EnvironmentLauncher",
    "check_layout",
    "forget_environment",
    "keep_start_error",
    "preflight",
    "started_environments",
    "wait_ready",
]

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
def check_layout(cfg: GenRMConfig, placement_group: Any = None) -> None:
    """Check the judges' layout against the connected Ray cluster, in the driver.

    A separate judge's GPUs, CPUs and nodes are checked against the cluster's totals; a colocated
    judge needs its group now (``placement_group``, or one named ``resources.colocate_with`` that
    exists): the actor joins it when it starts. The actor checks again when it reserves or joins,
    including the room left in the group's bundles. Nothing is checked when Ray is not connected.

    Raises:
        ConfigError: Every layout problem at once, each saying what to change.
    """
    import ray

    if not ray.is_initialized():
        return
    if cfg.resources.placement == "colocated":
        if any(j.backend != "http" for j in (cfg.judge, *cfg.reward.judges)):
            colocated_group(cfg.resources, placement_group)
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


def preflight(cfg: GenRMConfig, placement_group: Any = None) -> None:
    """Every start-up check the driver can make before the actor exists, reported at once.

    The judges' checkpoints and tokenizers (:func:`~nemo_genrm.env.startup.check_judge_sources`),
    the room their context leaves for an answer (:func:`~nemo_genrm.env.answer_room.check_answer_room`,
    with the tokenizers loaded here) and the layout (:func:`check_layout`). NeMo-RL's
    ``create_env`` returns before the actor has started its judge, so these are what it reports.

    Raises:
        ConfigError: Every problem found, each saying what to change.
    """
    from nemo_genrm.env.answer_room import check_answer_room, judge_tokenizers
    from nemo_genrm.env.startup import check_judge_sources
    from nemo_genrm.modes import build_mode
    from nemo_genrm.prompts import PromptBuilder

    problems: list[str] = []
    sources: set[str | None] = set()

    def collect(check: Callable[[], object]) -> None:
        try:
            check()
        except ConfigError as err:
            problems.extend(p for p in err.problems if p not in problems)
            sources.add(err.source)

    collect(lambda: check_judge_sources(cfg))
    if not problems:  # a judge that is not there has no tokenizer to count its room with
        # The mode's prompt with every field empty, counted with each judge's tokenizer, as the
        # environment's constructor will count it.
        fixed = lambda: build_mode(cfg, PromptBuilder(cfg.prompt, cfg.verdict)).fixed_request()  # noqa: E731
        collect(lambda: check_answer_room(cfg, fixed(), judge_tokenizers(cfg)))
    ensure_ray()
    collect(lambda: check_layout(cfg, placement_group))
    if problems:
        raise ConfigError(problems, source=sources.pop() if len(sources) == 1 else "env.genrm")


_STARTED: list[weakref.ref] = []
_STARTED_LOCK = threading.Lock()


def _remember(handle: Any) -> Any:
    with _STARTED_LOCK:
        _STARTED.append(weakref.ref(handle))
    return handle


def started_environments() -> list[Any]:
    """The handles of the GenRM environment actors this process created (``remote``, ``start``,
    NeMo-RL's ``create_env``) that are still referenced, oldest first; NeMo-RL's logger reads
    their metrics from here (:mod:`nemo_genrm.integrations.nemo_rl_metrics`)."""
    with _STARTED_LOCK:
        _STARTED[:] = [ref for ref in _STARTED if ref() is not None]
        return [h for h in (ref() for ref in _STARTED) if h is not None]


def forget_environment(handle: Any) -> None:
    """Drop ``handle`` from :func:`started_environments` (an actor found dead)."""
    with _STARTED_LOCK:
        _STARTED[:] = [ref for ref in _STARTED if ref() is not None and ref() is not handle]


class _Launch:
    """``GenRMEnvironment.options(...)``: Ray actor options, then ``remote`` or ``start``."""

    def __init__(self, actor_class: Any, options: dict[str, Any]):
        self._actor_class = actor_class
        self._options = options

    def remote(self, cfg: Any, *args: Any, **kwargs: Any) -> Any:
        """Validate ``cfg`` and make the driver's checks (:func:`preflight`), then create the
        actor (not waiting for it).

        Raises:
            ConfigError: Every problem found: the config, the judges' folders or tokenizers,
                their room for an answer, the layout.
        """
        try:
            config = validate(GenRMConfig, cfg, prefix="env.genrm")  # before Ray: a typo costs no cluster
            preflight(config, kwargs.get("placement_group"))
        except ConfigError as exc:  # the user's mistake: its message, not the package's frames
            raise exc.with_traceback(None) from None
        return _remember(self._actor_class.options(**self._options).remote(config, *args, **kwargs))

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
            _wait_ready(handle, config.fault_tolerance.startup_timeout_s, self._options)
        except BaseException as exc:  # Ctrl-C included: no actor is left behind
            ray.kill(handle)
            cause = getattr(exc, "cause", None)
            if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(cause, STARTUP_ERRORS):
                raise cause.with_traceback(None) from None  # the package's message, not Ray's wrapper
            if isinstance(exc, STARTUP_ERRORS):
                raise exc.with_traceback(None) from None
            raise
        return handle


def _wait_ready(handle: Any, timeout_s: float, options: dict[str, Any]) -> None:
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
                    f"({timeout_s:g} s): {describe_pending_actor(handle, options)}"
                ]
            )
    ray.get(ref)


def wait_ready(handle: Any, timeout_s: float) -> None:
    """Wait until a GenRM environment actor someone else created (NeMo-RL's ``create_env``) has
    its judge up; raise its start-up error as the package's own type, not Ray's wrapper.

    Args:
        handle: The actor.
        timeout_s: How long it may wait to be scheduled (``fault_tolerance.startup_timeout_s``).

    Raises:
        ConfigError: A problem only the actor could see (a layout the cluster cannot give now).
        JudgeStartupError: The judge's workers did not start, or the actor was not scheduled.
    """
    import ray

    try:
        _wait_ready(handle, timeout_s, {})
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, STARTUP_ERRORS):
            raise cause.with_traceback(None) from None
        raise


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
