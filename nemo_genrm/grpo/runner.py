"""Build a GRPO run from a config (Ray, policy actor, GenRM environment, data, logger) and tear it down.

Placement on one node:

- CPU only (``cluster.gpus_per_node: 0``): the policy actor on CPU, the judge ``separate`` with
  ``gpus_per_replica: 0``.
- ``separate`` judge on GPUs: the policy actor takes one GPU; the judge reserves its own.
- ``colocated`` judge: the driver creates the policy's placement group (one GPU bundle) named
  :data:`POLICY_GROUP`; the policy takes ``1 - gpu_fraction`` of the GPU and the judge joins
  the group with ``gpu_fraction``, waking only to score.

A run that started its own Ray cluster tears it down when the driver is told to stop: SIGTERM
or SIGINT raises :class:`RunTerminated` in the main thread (the caller's ``finally`` then runs
:meth:`GRPORun.shutdown`), and further signals are ignored until the teardown is done, so a
second Ctrl-C cannot leave Ray processes behind half torn down. A SIGKILL leaves no such
chance, so the driver starts a guard process (:mod:`nemo_genrm.orphan_guard`) before anything
else: once the driver, or the ``uv run`` that launched it, is gone, the guard stops every
process of the run within seconds.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import ray

from nemo_genrm.console import heartbeat
from nemo_genrm.grpo.checkpoint import Checkpointer, RunFolders, plan_run
from nemo_genrm.grpo.config import GRPOMasterConfig
from nemo_genrm.grpo.data import PolicyPromptRenderer, load_splits
from nemo_genrm.grpo.logger import MetricsLogger
from nemo_genrm.grpo.loop import GRPOTrainer
from nemo_genrm.grpo.models import resolve_model_name
from nemo_genrm.grpo.policy import PolicyActor
from nemo_genrm.orphan_guard import start_guard
from nemo_genrm.ray_env import actor_options, ensure_ray

logger = logging.getLogger(__name__)

__all__ = ["POLICY_GROUP", "GRPORun", "RunTerminated", "build_run", "resolve_models"]

POLICY_GROUP = "genrm_grpo_policy"
"""Name of the policy's placement group that a colocated judge joins."""
_MIN_RAY_CPUS = 4  # logical CPUs: the policy, the env actor and a judge worker, on any machine
_RAY_START_ATTEMPTS = 3


def resolve_models(cfg: GRPOMasterConfig) -> GRPOMasterConfig:
    """A copy of ``cfg`` with every ``tiny://`` name replaced by the folder of its built model."""
    pol, tok, judge = cfg.policy, cfg.policy.tokenizer, cfg.env.genrm.judge
    if tok.name:
        tok = tok.model_copy(update={"name": resolve_model_name(tok.name)})
    pol = pol.model_copy(update={"model_name": resolve_model_name(pol.model_name), "tokenizer": tok})
    if judge.backend != "http":
        names = {"model_name": resolve_model_name(judge.model_name)}
        if judge.tokenizer:
            names["tokenizer"] = resolve_model_name(judge.tokenizer)
        judge = judge.model_copy(update=names)
    env = cfg.env.model_copy(update={"genrm": cfg.env.genrm.model_copy(update={"judge": judge})})
    return cfg.model_copy(update={"policy": pol, "env": env})


def _start_ray(cfg: GRPOMasterConfig) -> bool:
    """Connect to Ray unless this process already is; return whether this call connected.

    ``RAY_ADDRESS`` set: join that cluster. Otherwise start a local one sized by ``cluster``.
    """
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        # Join a running cluster (`ray start --head`, or a test's); it brings its own resources.
        ensure_ray(address=os.environ["RAY_ADDRESS"])
        logger.info("Joined the Ray cluster at %s", os.environ["RAY_ADDRESS"])
        return True
    num_cpus = cfg.cluster.num_cpus or max(os.cpu_count() or 1, _MIN_RAY_CPUS)
    for attempt in range(_RAY_START_ATTEMPTS):
        try:
            ensure_ray(
                address="local",  # a cluster of the run's own, even where `ray start` runs one
                num_cpus=num_cpus,
                num_gpus=cfg.cluster.gpus_per_node,
                include_dashboard=False,
                runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "false"}},
            )
            return True
        except Exception as exc:  # Ray raises a bare Exception when its node does not come up
            if attempt + 1 == _RAY_START_ATTEMPTS or "timed out during startup" not in str(exc):
                raise
            # On a busy machine Ray's agents can miss its fixed 30 s start-up window; try again.
            logger.warning("Ray did not start in time (%s); retrying", exc)
            ray.shutdown()
    return True


class RunTerminated(SystemExit):
    """The driver got SIGTERM or SIGINT; exits with 128 + the signal number after teardown."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_signalled = threading.Event()  # a stop signal arrived
_tearing_down = threading.Event()  # GRPORun.shutdown is running: signals wait for it
_previous_handlers: dict[int, Any] = {}


def _on_stop_signal(signum: int, frame: Any) -> None:
    if _signalled.is_set() or _tearing_down.is_set():
        logger.warning("signal %d ignored: the run is shutting down", signum)
        return
    _signalled.set()
    logger.warning("signal %d: stopping the run and its Ray cluster", signum)
    raise RunTerminated(signum)


def _stop_on_signals() -> None:
    """Route SIGTERM/SIGINT to :func:`_on_stop_signal` until the run is shut down.

    Called after ``ray.init`` (which installs its own SIGTERM handler), in the main thread only.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    _signalled.clear()
    _tearing_down.clear()
    for signum in _STOP_SIGNALS:
        _previous_handlers[signum] = signal.signal(signum, _on_stop_signal)


def _restore_signals() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, handler in list(_previous_handlers.items()):
        signal.signal(signum, handler)
    _previous_handlers.clear()


@dataclass
class GRPORun:
    """Everything a run holds; :meth:`shutdown` releases it all (safe to call twice)."""

    cfg: GRPOMasterConfig
    trainer: GRPOTrainer
    policy: Any
    env: Any
    metrics_logger: MetricsLogger
    policy_group: Any = None
    started_ray: bool = False
    guard: Any = None  # the orphan guard process, when this run started a local cluster
    folders: RunFolders | None = None  # the run's own log and checkpoint folders
    _closed: bool = field(default=False, repr=False)

    def shutdown(self) -> None:
        """Stop the environment (and its judge), the policy, the loggers and Ray if we started it."""
        if self._closed:
            return
        self._closed = True
        _tearing_down.set()
        try:
            self._release()
        finally:
            _restore_signals()
            _tearing_down.clear()

    def _release(self) -> None:
        # Stopped by a signal: a short grace for the judge's own cleanup, then Ray goes anyway.
        grace_s = 10 if _signalled.is_set() else 120
        try:
            if self.env is not None:
                ray.get(self.env.shutdown.remote(), timeout=grace_s)
        except Exception as exc:  # e.g. the actor already died at start-up (its error was raised)
            logger.warning("environment shutdown failed: %s", str(exc).splitlines()[0] if str(exc) else exc)
        for actor in (self.env, self.policy):
            if actor is not None:
                ray.kill(actor)
        if self.policy_group is not None:
            ray.util.remove_placement_group(self.policy_group)
        self.metrics_logger.close()
        if self.started_ray:
            ray.shutdown()
        if self.guard is not None:  # the cluster is down: nothing left to guard
            self.guard.terminate()
            self.guard.wait(timeout=10)


def _start_policy(cfg: GRPOMasterConfig) -> tuple[Any, Any, float | None]:
    """Start the policy actor; return it, its placement group (colocated) and its GPU share."""
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    args = (cfg.policy, cfg.loss_fn, cfg.grpo.seed)
    res = cfg.env.genrm.resources
    if cfg.cluster.gpus_per_node == 0:
        return PolicyActor.options(**actor_options(num_cpus=1, num_gpus=0)).remote(*args), None, None
    if res.placement != "colocated":
        return PolicyActor.options(**actor_options(num_cpus=1, num_gpus=1)).remote(*args), None, 1.0
    tp = cfg.env.genrm.judge.tensor_parallel_size
    bundles = [{"GPU": 1.0, "CPU": 1.0 + res.cpus_per_replica} for _ in range(max(1, res.num_replicas * tp))]
    group = placement_group(bundles, strategy="STRICT_PACK", name=POLICY_GROUP)
    ray.get(group.ready(), timeout=300)
    share = 1.0 - res.gpu_fraction
    strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
    actor = PolicyActor.options(**actor_options(num_cpus=1, num_gpus=share, scheduling_strategy=strategy)).remote(*args)
    return actor, group, share


def _start_env(cfg: GRPOMasterConfig, group: Any, policy_share: float | None) -> Any:
    from nemo_genrm.env.environment import GenRMEnvironment

    genrm = cfg.env.genrm
    kwargs: dict[str, Any] = {}
    if genrm.resources.placement == "colocated":
        resources = genrm.resources.model_copy(update={"colocate_with": POLICY_GROUP})
        genrm = genrm.model_copy(update={"resources": resources})
        kwargs = {"placement_group": group, "policy_gpu_fraction": policy_share}
    # Checked in the driver, then waited for: a judge that cannot start raises its own error here.
    return GenRMEnvironment.options(**actor_options(num_cpus=0)).start(genrm, **kwargs)


def build_run(cfg: GRPOMasterConfig) -> GRPORun:
    """Choose the run's folders, start Ray, the policy and the environment, and load the data.

    The run gets folders of its own under ``logger.log_dir`` and ``checkpointing.checkpoint_dir``
    (or continues the run ``checkpointing.resume`` names; see
    :func:`~nemo_genrm.grpo.checkpoint.plan_run`), and says so in one log line before anything
    starts; :attr:`GRPORun.folders` and :attr:`GRPORun.cfg` hold them.

    Args:
        cfg: The validated config (``tiny://`` names are resolved here).

    Returns:
        A ready :class:`GRPORun`; call :meth:`GRPORun.shutdown` when done.

    Raises:
        ConfigError: The data, models or resource layout do not fit the config.
    """
    from transformers import AutoTokenizer

    # From the start, not once Ray runs: a `uv run` killed while the models are built or the
    # data loaded takes this driver with it, and later every process the run starts.
    # (Only where this process will start or join Ray itself: a caller with Ray of its own, a
    # test session, owns its processes.)
    guard = None if ray.is_initialized() else start_guard()
    folders = plan_run(cfg)
    logger.info("%s", folders.describe(cfg.grpo.max_num_steps))
    cfg = resolve_models(folders.apply(cfg))
    tokenizer = AutoTokenizer.from_pretrained(cfg.policy.tokenizer_name)
    splits = load_splits(cfg.data, cfg.grpo.seed)
    builder = PolicyPromptRenderer(cfg.data, tokenizer)
    max_prompt = cfg.policy.max_total_sequence_length - cfg.policy.generation.max_new_tokens
    train, val = builder.render_all(splits.train, max_prompt), builder.render_all(splits.val, max_prompt)
    start = time.perf_counter()
    with heartbeat("starting Ray"):
        started = _start_ray(cfg)
    if started:
        _stop_on_signals()
    logger.info(
        "Ray ready in %.1fs; starting the policy and the judge (each loads its model in a process of its own)",
        time.perf_counter() - start,
    )
    policy = env = group = None
    metrics_logger = MetricsLogger(cfg.logger, run_config=cfg.model_dump())
    try:
        with heartbeat("starting the policy and the judge"):
            policy, group, share = _start_policy(cfg)
            env = _start_env(cfg, group, share)
            ray.get(policy.describe.remote())
        logger.info("Policy and judge ready in %.1fs", time.perf_counter() - start)
        checkpointer = Checkpointer(cfg.checkpointing) if cfg.checkpointing.enabled else None
        trainer = GRPOTrainer(cfg, policy, env, train, val, metrics_logger, checkpointer)
    except BaseException:
        run = GRPORun(cfg, None, policy, env, metrics_logger, group, started, guard, folders)  # type: ignore[arg-type]
        run.shutdown()  # release what did start
        raise
    return GRPORun(cfg, trainer, policy, env, metrics_logger, group, started, guard, folders)
