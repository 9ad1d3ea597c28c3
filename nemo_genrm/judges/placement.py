"""Where the judge runs: its own placement group(s), or a share of the policy's GPUs.

Two layouts (``env.genrm.resources.placement``):

- ``separate``: the judge reserves ``num_replicas x ranks`` bundles of its own for the whole run,
  one bundle per tensor-parallel rank: ``{"GPU": gpus_per_replica / tp, "CPU": cpus_per_replica}``
  (CPU-only bundles when ``gpus_per_replica`` is 0). On one node the bundles form a single
  ``STRICT_PACK`` group (the judge stays on one machine, as asked). Over several nodes, a judge
  without tensor parallelism takes one ``SPREAD`` group (replicas on as many nodes as possible);
  a tensor-parallel judge takes one ``STRICT_PACK`` group per replica, so each replica's ranks
  share a node and its collectives stay on the node's links. ``resources.strategy`` names the
  strategy itself (``STRICT_SPREAD``: every worker on a node of its own), ``node_labels`` pins
  every bundle to nodes whose labels match (Ray's bundle label selectors) and
  ``custom_resources`` adds custom resources to every bundle (nodes started with
  ``--resources``). Before any group is created, the layout is checked against every alive
  node's totals (:mod:`nemo_genrm.judges.node_fit`), so one that can never be placed fails at
  once naming what is missing. The groups are removed on :meth:`JudgeResources.release`.
- ``colocated``: the judge joins a placement group that already exists (the policy's), named by
  ``colocate_with`` or passed in code, and asks for ``gpu_fraction`` of each GPU bundle it uses.
  Replica ``r`` uses the group's GPU bundles ``r*tp .. r*tp+tp-1``. Joined groups are never
  removed by the judge.

Every layout problem found at start-up is reported at once in a :class:`ConfigError` whose lines
say what to change.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nemo_genrm.config import ConfigError, FaultToleranceConfig, JudgeConfig, ResourcesConfig
from nemo_genrm.config.labels import describe_selector
from nemo_genrm.judges.base import Placement, ReplicaPlacement
from nemo_genrm.judges.node_fit import ClusterView, fit_problems, format_resources, free_on_nodes, label_problems

logger = logging.getLogger(__name__)

_EPS = 1e-6


# ------------------------------------------------------------------------------- pure planning
@dataclass(frozen=True)
class GroupSpec:
    """One placement group to create.

    Attributes:
        bundles: Resource dicts, one per bundle.
        strategy: Ray placement strategy (``STRICT_PACK``, ``PACK``, ``SPREAD``, ``STRICT_SPREAD``).
        label_selector: Labels every bundle's node must match (empty: any node).
    """

    bundles: tuple[dict[str, float], ...]
    strategy: str
    label_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SeparatePlan:
    """The groups a separate judge creates and where each replica's ranks go.

    Attributes:
        groups: The placement groups to create.
        replica_slots: Per replica, ``(group index, bundle indices)`` (one bundle per rank).
        gpus_per_rank: GPUs each worker asks for (0 on CPU).
        cpus_per_rank: CPUs each worker asks for.
    """

    groups: tuple[GroupSpec, ...]
    replica_slots: tuple[tuple[int, tuple[int, ...]], ...]
    gpus_per_rank: float
    cpus_per_rank: float

    @property
    def total_gpus(self) -> float:
        """GPUs the plan reserves."""
        return sum(b.get("GPU", 0.0) for g in self.groups for b in g.bundles)

    @property
    def total_cpus(self) -> float:
        """CPUs the plan reserves."""
        return sum(b.get("CPU", 0.0) for g in self.groups for b in g.bundles)


def plan_separate(judge: JudgeConfig, resources: ResourcesConfig) -> SeparatePlan:
    """Plan the placement groups of a separate judge (no Ray needed).

    Args:
        judge: The judge section (its tensor parallel size sets the ranks per replica).
        resources: The resources section (``placement: separate``).

    Returns:
        The groups, their strategies and each replica's bundles.
    """
    res = resources
    tp = judge.tensor_parallel_size
    gpus_per_rank = res.gpus_per_replica / tp if res.gpus_per_replica else 0.0
    bundle: dict[str, float] = {"CPU": float(res.cpus_per_replica)}
    if gpus_per_rank:
        bundle["GPU"] = float(gpus_per_rank)
    bundle.update({name: float(amount) for name, amount in res.custom_resources.items()})
    labels = dict(res.node_labels)
    if res.num_nodes > 1 and tp > 1:
        # One group per replica: a replica's ranks share a node, replicas go where they fit.
        groups = tuple(
            GroupSpec(tuple(dict(bundle) for _ in range(tp)), "STRICT_PACK", labels) for _ in range(res.num_replicas)
        )
        slots = tuple((r, tuple(range(tp))) for r in range(res.num_replicas))
    else:
        strategy = res.strategy
        if strategy == "auto":
            strategy = "STRICT_PACK" if res.num_nodes == 1 else "SPREAD"
        count = res.num_replicas * tp
        groups = (GroupSpec(tuple(dict(bundle) for _ in range(count)), strategy, labels),)
        slots = tuple((0, tuple(range(r * tp, (r + 1) * tp))) for r in range(res.num_replicas))
    return SeparatePlan(groups, slots, gpus_per_rank, float(res.cpus_per_replica))


def separate_problems(
    judge: JudgeConfig, resources: ResourcesConfig, plan: SeparatePlan, cluster: ClusterView
) -> list[str]:
    """Layout problems of a separate judge against the cluster (no Ray needed).

    Args:
        judge: The judge section.
        resources: The resources section.
        plan: From :func:`plan_separate`.
        cluster: What the cluster offers.

    Returns:
        One line per problem, each saying what to change; empty when the layout fits.
    """
    res = resources
    tp = judge.tensor_parallel_size
    problems = []
    if plan.total_gpus > cluster.gpus + _EPS:
        problems.append(
            f"the judge needs {plan.total_gpus:g} GPUs (resources.num_replicas {res.num_replicas} x "
            f"gpus_per_replica {res.gpus_per_replica}) but the Ray cluster has {cluster.gpus:g}: "
            "lower num_replicas or gpus_per_replica, or add GPUs"
        )
    elif res.num_nodes == 1 and plan.total_gpus > cluster.max_gpus_per_node + _EPS:
        problems.append(
            f"resources.num_nodes is 1 but the judge needs {plan.total_gpus:g} GPUs and the largest "
            f"node has {cluster.max_gpus_per_node:g}: raise num_nodes or lower the GPU count"
        )
    elif tp > 1 and res.gpus_per_replica > cluster.max_gpus_per_node + _EPS:
        problems.append(
            f"one replica needs {res.gpus_per_replica} GPUs on one node but the largest node has "
            f"{cluster.max_gpus_per_node:g}: lower judge tensor_parallel_size and gpus_per_replica"
        )
    if plan.total_cpus > cluster.cpus + _EPS:
        problems.append(
            f"the judge needs {plan.total_cpus:g} CPUs ({res.num_replicas} replicas x {tp} ranks x "
            f"cpus_per_replica {res.cpus_per_replica}) but the Ray cluster has {cluster.cpus:g}: "
            "lower resources.cpus_per_replica or num_replicas"
        )
    if res.num_nodes > cluster.nodes:
        problems.append(
            f"resources.num_nodes is {res.num_nodes} but the Ray cluster has {cluster.nodes} "
            f"node(s): set num_nodes to at most {cluster.nodes}"
        )
    if res.num_nodes > 1 and res.num_nodes > res.num_replicas * tp:
        problems.append(
            f"resources.num_nodes ({res.num_nodes}) is more than the judge's {res.num_replicas * tp} "
            "worker(s) can use: lower num_nodes or raise num_replicas"
        )
    for name, amount in sorted(res.custom_resources.items()):
        needed = amount * res.num_replicas * tp
        have = float(cluster.totals.get(name, 0.0))
        if needed > have + _EPS:
            problems.append(
                f"the judge needs {needed:g} {name} (resources.custom_resources.{name} {amount:g} x "
                f"{res.num_replicas * tp} worker(s)) but the Ray cluster has {have:g}: start judge nodes "
                f"with `ray start --resources '{{\"{name}\": ...}}'` or lower num_replicas"
            )
    if cluster.node_list:
        # Per node, what the totals above cannot see: labels, a node too small, the strategy.
        # (Past a shortage of the totals, the per-node lines would only repeat it.)
        group = plan.groups[0]
        unmatched = label_problems(group.bundles[0], cluster.node_list, res.node_labels)
        if not problems and not unmatched:
            problems += fit_problems(
                group.bundles[0],
                len(plan.groups),
                len(group.bundles),
                group.strategy,
                cluster.node_list,
                res.node_labels,
            )
        problems += unmatched
    return problems


def colocated_problems(
    judge: JudgeConfig,
    resources: ResourcesConfig,
    bundle_specs: Sequence[Mapping[str, float]],
    *,
    free: Sequence[Mapping[str, float]] | None = None,
    policy_gpu_fraction: float | None = None,
) -> list[str]:
    """Layout problems of a colocated judge inside a group (no Ray needed).

    Args:
        judge: The judge section.
        resources: The resources section (``placement: colocated``).
        bundle_specs: The joined group's bundles (``pg.bundle_specs``).
        free: Per bundle, the resources still free in it (``None``: not checked).
        policy_gpu_fraction: Share of each GPU the policy's workers hold, when the caller knows.

    Returns:
        One line per problem, each saying what to change.
    """
    res = resources
    tp = judge.tensor_parallel_size
    problems = []
    gpu_bundles = [i for i, b in enumerate(bundle_specs) if b.get("GPU", 0.0) > 0]
    needed = res.num_replicas * tp
    if res.gpus_per_replica != tp:
        problems.append(
            f"colocated: resources.gpus_per_replica ({res.gpus_per_replica}) must equal the tensor "
            f"parallel size ({tp}); each rank takes gpu_fraction of one of the policy's GPUs"
        )
    if needed > len(gpu_bundles):
        problems.append(
            f"colocated: the judge needs {needed} GPU bundle(s) (num_replicas {res.num_replicas} x "
            f"tensor parallel {tp}) but the group to join has {len(gpu_bundles)}: lower "
            "num_replicas or tensor_parallel_size"
        )
    if policy_gpu_fraction is not None and policy_gpu_fraction + res.gpu_fraction > 1.0 + _EPS:
        problems.append(
            f"colocated: judge gpu_fraction {res.gpu_fraction} + policy fraction "
            f"{policy_gpu_fraction} = {res.gpu_fraction + policy_gpu_fraction:g} > 1 on each GPU: "
            f"set resources.gpu_fraction to at most {max(0.0, 1.0 - policy_gpu_fraction):g}"
        )
    for index in gpu_bundles[:needed]:
        capacity = float(bundle_specs[index].get("GPU", 0.0))
        if res.gpu_fraction > capacity + _EPS:
            problems.append(
                f"colocated: bundle {index} holds {capacity:g} GPU, less than resources.gpu_fraction "
                f"{res.gpu_fraction}: lower gpu_fraction"
            )
            continue
        if free is None:
            continue
        gpu_free = float(free[index].get("GPU", 0.0))
        cpu_free = float(free[index].get("CPU", 0.0))
        if res.gpu_fraction > gpu_free + _EPS:
            problems.append(
                f"colocated: bundle {index} has {gpu_free:g} GPU free (the rest is held by other "
                f"workers) but the judge asks for {res.gpu_fraction}: set resources.gpu_fraction "
                f"to at most {gpu_free:g}"
            )
        if res.cpus_per_replica > cpu_free + _EPS:
            problems.append(
                f"colocated: bundle {index} has {cpu_free:g} CPU free but each judge worker asks for "
                f"{res.cpus_per_replica}: set resources.cpus_per_replica to at most {cpu_free:g}"
            )
    return problems


# ------------------------------------------------------------------------------- with Ray
@dataclass
class JudgeResources:
    """The judge's placement and the groups it holds.

    Attributes:
        placement: Where each replica's workers go (pass to ``create_judge``).
        owned_groups: Groups created for the judge; removed by :meth:`release`.
        joined_group: The group joined when colocated (never removed here).
        layout: ``separate``, ``colocated`` or ``none`` (an HTTP judge reserves nothing).
    """

    placement: Placement
    owned_groups: list[Any] = field(default_factory=list)
    joined_group: Any = None
    layout: str = "separate"
    _released: bool = False

    def release(self, *, timeout_s: float = 30.0) -> None:
        """Remove the groups the judge created and wait until Ray has them back; idempotent.

        Args:
            timeout_s: How long to wait for Ray to report the groups removed.
        """
        if self._released:
            return
        self._released = True
        if not self.owned_groups:
            return
        from ray.util.placement_group import (
            placement_group_table,
            remove_placement_group,
        )

        for group in self.owned_groups:
            try:
                remove_placement_group(group)
            except Exception:  # already gone (cluster shut down, removed by hand)
                logger.debug("placement group %s already removed", group.id.hex(), exc_info=True)
        deadline = time.monotonic() + timeout_s
        for group in self.owned_groups:
            while time.monotonic() < deadline:
                try:
                    if placement_group_table(group).get("state") == "REMOVED":
                        break
                except Exception:  # noqa: BLE001 - the cluster is gone: nothing left to wait for
                    break
                time.sleep(0.05)
        logger.info("released %d judge placement group(s)", len(self.owned_groups))
        self.owned_groups = []


# How long the groups may take to be scheduled when the caller does not say: the default of
# fault_tolerance.startup_timeout_s, which the environment passes.
_STARTUP_TIMEOUT_S: float = FaultToleranceConfig.model_fields["startup_timeout_s"].default


def acquire_resources(
    judge: JudgeConfig,
    resources: ResourcesConfig,
    *,
    placement_group: Any = None,
    policy_gpu_fraction: float | None = None,
    ready_timeout_s: float = _STARTUP_TIMEOUT_S,
    name_prefix: str = "genrm_judge",
) -> JudgeResources:
    """Reserve (separate) or join (colocated) the judge's resources on the connected Ray cluster.

    Args:
        judge: The judge section (its backend and tensor parallel size).
        resources: The resources section.
        placement_group: Colocated only: the group to join, as a handle (wins over
            ``resources.colocate_with``).
        policy_gpu_fraction: Colocated only: share of each GPU the policy holds, when known.
        ready_timeout_s: How long to wait for the groups to be scheduled (the environment
            passes ``fault_tolerance.startup_timeout_s``; its default otherwise).
        name_prefix: Prefix of the names of the created groups.

    Returns:
        The placement and the groups held.

    Raises:
        ConfigError: Every layout problem at once (GPUs or nodes the cluster lacks, fractions
            over 1, TP not dividing the GPUs, no group to join, a group that does not exist), or
            groups that could not be scheduled in time.
    """
    if judge.backend == "http":
        # The judge is a remote server: nothing to reserve on this cluster.
        return JudgeResources(Placement(), layout="none")
    if resources.placement == "colocated":
        return _join(judge, resources, placement_group, policy_gpu_fraction, ready_timeout_s)
    if placement_group is not None:
        logger.warning("a placement group was passed but resources.placement is 'separate'; ignoring it")
    return _reserve(judge, resources, ready_timeout_s, name_prefix)


def _reserve(
    judge: JudgeConfig, resources: ResourcesConfig, ready_timeout_s: float, name_prefix: str
) -> JudgeResources:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    plan = plan_separate(judge, resources)
    suffix = uuid.uuid4().hex[:8]
    problems = separate_problems(judge, resources, plan, ClusterView.current())
    if problems:
        raise ConfigError(problems, source="env.genrm.resources")
    groups = [
        placement_group(
            list(spec.bundles),
            strategy=spec.strategy,
            name=f"{name_prefix}_{suffix}_{i}",
            bundle_label_selector=[dict(spec.label_selector)] * len(spec.bundles) if spec.label_selector else None,
        )
        for i, spec in enumerate(plan.groups)
    ]
    try:
        ray.get([g.ready() for g in groups], timeout=ready_timeout_s)
    except Exception as exc:
        for group in groups:
            remove_placement_group(group)
        raise ConfigError(_not_scheduled(plan, ready_timeout_s), source="env.genrm.resources") from exc
    replicas = tuple(
        ReplicaPlacement(groups[g], bundles, plan.gpus_per_rank, plan.cpus_per_rank)
        for g, bundles in plan.replica_slots
    )
    logger.info(
        "judge placement: %d group(s), %d replica(s), %g GPU + %g CPU per rank",
        len(groups),
        len(replicas),
        plan.gpus_per_rank,
        plan.cpus_per_rank,
    )
    return JudgeResources(Placement(replicas), owned_groups=groups, layout="separate")


def _not_scheduled(plan: SeparatePlan, timeout_s: float) -> str:
    """Why the groups may not have been placed: what each eligible node has free now."""
    import ray

    first = plan.groups[0]
    bundle = first.bundles[0]
    pinned = f" on nodes labelled {describe_selector(first.label_selector)}" if first.label_selector else ""
    try:  # a developer API of Ray: per node, what is free now
        from ray._private.state import available_resources_per_node

        free = free_on_nodes(
            bundle, ClusterView.current().node_list, available_resources_per_node(), first.label_selector
        )
    except Exception:  # noqa: BLE001 - diagnostics only: fall back to the cluster's totals
        free = f"cluster-wide {_short(ray.available_resources(), bundle)}"
    return (
        f"the judge's placement groups ({sum(len(g.bundles) for g in plan.groups)} workers of "
        f"{format_resources(bundle)}, strategy {first.strategy}{pinned}) were not scheduled within "
        f"{timeout_s:g}s (fault_tolerance.startup_timeout_s): the nodes have these resources in total, "
        f"but other workers hold them; free now: {free}. Free them, or lower resources.num_replicas / "
        "gpus_per_replica / cpus_per_replica / custom_resources"
    )


COLOCATED_UNDER_NEMO_RL = (
    "NeMo-RL's GRPO creates its environments (create_env) before its policy's placement groups, "
    "and its policy and generation workers then take every GPU share of those groups, so a judge "
    "cannot join them. Use resources.placement: separate and leave the judge's GPUs out of "
    "NeMo-RL's cluster block (cluster.gpus_per_node: the node's GPUs minus the judge's), or serve the "
    "judge over HTTP (judge.backend: http); docs/nemo_rl.md, section GPUs"
)
"""What a NeMo-RL user with ``placement: colocated`` should do instead."""


def colocated_group(resources: ResourcesConfig, handle: Any = None) -> Any:
    """The placement group a colocated judge joins: ``handle``, else the one named
    ``resources.colocate_with``, which must exist already (not waited for).

    Raises:
        ConfigError: No group is given or named, or no group has that name; the message says
            what to do, NeMo-RL's case included (:data:`COLOCATED_UNDER_NEMO_RL`).
    """
    import ray

    if handle is not None:
        return handle
    if not resources.colocate_with:
        raise ConfigError(
            (
                "resources.placement is 'colocated' but there is no placement group to join: pass it in code "
                "(placement_group=...) or name one that exists before the environment starts in "
                f"resources.colocate_with. Under NeMo-RL there is none: {COLOCATED_UNDER_NEMO_RL}"
            ),
            source="env.genrm.resources",
        )
    try:
        return ray.util.get_placement_group(resources.colocate_with)
    except ValueError:
        table = ray.util.placement_group_table().values()
        names = sorted({str(t.get("name")) for t in table if t.get("state") != "REMOVED" and t.get("name")})
        raise ConfigError(
            (
                f"resources.colocate_with: no placement group named {resources.colocate_with!r} exists when the "
                f"environment starts (existing: {', '.join(names) or 'none'}); create it first or fix the name. "
                f"Under NeMo-RL: {COLOCATED_UNDER_NEMO_RL}"
            ),
            source="env.genrm.resources",
        ) from None


def _join(
    judge: JudgeConfig,
    resources: ResourcesConfig,
    handle: Any,
    policy_gpu_fraction: float | None,
    ready_timeout_s: float,
) -> JudgeResources:
    import ray
    import ray.exceptions

    res = resources
    group = colocated_group(res, handle)
    try:
        ray.get(group.ready(), timeout=ready_timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise ConfigError(
            f"the placement group to join was not scheduled within {ready_timeout_s:g}s "
            "(fault_tolerance.startup_timeout_s): the policy's resources are not available",
            source="env.genrm.resources",
        ) from None
    specs = group.bundle_specs
    free = _bundle_free(group.id.hex(), len(specs))
    problems = colocated_problems(judge, resources, specs, free=free, policy_gpu_fraction=policy_gpu_fraction)
    if problems:
        raise ConfigError(problems, source="env.genrm.resources")
    tp = judge.tensor_parallel_size
    gpu_bundles = [i for i, b in enumerate(specs) if b.get("GPU", 0.0) > 0]
    replicas = tuple(
        ReplicaPlacement(group, tuple(gpu_bundles[r * tp : (r + 1) * tp]), res.gpu_fraction, res.cpus_per_replica)
        for r in range(res.num_replicas)
    )
    logger.info(
        "judge colocated in group %s: bundles %s, %g GPU each",
        res.colocate_with or group.id.hex(),
        [r.bundle_indices for r in replicas],
        res.gpu_fraction,
    )
    return JudgeResources(Placement(replicas), joined_group=group, layout="colocated")


def _bundle_free(group_hex: str, count: int) -> list[dict[str, float]]:
    """Resources still free in each bundle of a group (Ray exposes them per bundle)."""
    import ray

    available = ray.available_resources()
    return [
        {kind: float(available.get(f"{kind}_group_{i}_{group_hex}", 0.0)) for kind in ("GPU", "CPU")}
        for i in range(count)
    ]


def _short(resources: Mapping[str, float], bundle: Mapping[str, float] | None = None) -> str:
    """The CPU, GPU and the bundle's other resources in ``resources`` (absent ones as 0)."""
    kinds = {"CPU", "GPU", *(bundle or {})}
    return ", ".join(f"{k}={float(resources.get(k, 0.0)):g}" for k in sorted(kinds))
