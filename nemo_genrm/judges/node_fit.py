"""Whether the judge's placement groups can fit the cluster's nodes, and if not, what is missing.

Pure functions over what each alive node has in total (:class:`NodeView`, read from
``ray.nodes()``), so start-up can refuse a layout that can never be scheduled with a message
that names the missing resources and nodes, instead of waiting for a group Ray will never place.
Resources other workers hold at the moment are not seen here: a layout that fits the totals but
not what is free ends at ``fault_tolerance.startup_timeout_s`` (:mod:`nemo_genrm.judges.placement`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nemo_genrm.config.labels import describe_selector, node_matches, user_labels

__all__ = ["ClusterView", "NodeView", "fit_problems", "format_resources", "free_on_nodes", "label_problems"]

_EPS = 1e-6


@dataclass(frozen=True)
class NodeView:
    """One alive node as start-up sees it.

    Attributes:
        node_id: Ray's node id (hex).
        resources: Its total resources (``CPU``, ``GPU``, custom ones).
        labels: Its labels (Ray's own ``ray.io/...`` ones included).
    """

    node_id: str
    resources: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    def holds(self, bundle: Mapping[str, float]) -> int:
        """How many bundles like ``bundle`` fit this node's totals."""
        counts = [
            math.floor((float(self.resources.get(kind, 0.0)) + _EPS) / need)
            for kind, need in bundle.items()
            if need > 0
        ]
        return min(counts) if counts else 0


@dataclass(frozen=True)
class ClusterView:
    """What the Ray cluster offers, as seen at start-up.

    Attributes:
        gpus: Total GPUs in the cluster (``ray.cluster_resources()``).
        cpus: Total CPUs.
        nodes: Alive nodes.
        max_gpus_per_node: The most GPUs any one node has.
        totals: Every resource of the cluster in total (custom ones included).
        node_list: Each alive node's totals and labels (empty: per-node checks are skipped).
    """

    gpus: float
    cpus: float
    nodes: int
    max_gpus_per_node: float
    totals: Mapping[str, float] = field(default_factory=dict)
    node_list: tuple[NodeView, ...] = ()

    @classmethod
    def current(cls) -> ClusterView:
        """Read the connected Ray cluster."""
        import ray

        totals = ray.cluster_resources()
        alive = [n for n in ray.nodes() if n.get("Alive")]
        per_node = [float(n.get("Resources", {}).get("GPU", 0.0)) for n in alive]
        return cls(
            gpus=float(totals.get("GPU", 0.0)),
            cpus=float(totals.get("CPU", 0.0)),
            nodes=len(alive),
            max_gpus_per_node=max(per_node, default=0.0),
            totals={k: float(v) for k, v in totals.items()},
            node_list=tuple(
                NodeView(n["NodeID"], dict(n.get("Resources") or {}), dict(n.get("Labels") or {})) for n in alive
            ),
        )


def format_resources(resources: Mapping[str, float]) -> str:
    """``{CPU: 1, judge_slot: 1}`` for messages (zero amounts left out)."""
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items()) if v) + "}"


def _shortfall(bundle: Mapping[str, float], nodes: Sequence[NodeView]) -> str:
    """What even the best-provided node lacks for one bundle, per resource."""
    parts = []
    for kind, need in sorted(bundle.items()):
        most = max((float(n.resources.get(kind, 0.0)) for n in nodes), default=0.0)
        if need > most + _EPS:
            parts.append(
                f"{kind} (needs {need:g}; " + (f"the most one node has is {most:g})" if most else "no node has it)")
            )
    return ", ".join(parts)


def _start_hint(bundle: Mapping[str, float], selector: Mapping[str, str]) -> str:
    """A ``ray start`` line that would add a node able to take the judge's workers."""
    custom = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU")}
    parts = ["ray start --address=<head>"]
    if bundle.get("CPU"):
        parts.append(f"--num-cpus={math.ceil(bundle['CPU'])}")
    if bundle.get("GPU"):
        parts.append(f"--num-gpus={math.ceil(bundle['GPU'])}")
    if custom:
        parts.append(f"--resources='{json.dumps(custom)}'")
    plain = {k: v for k, v in selector.items() if not v.startswith("!") and not v.startswith("in(")}
    if plain:
        parts.append("--labels=" + ",".join(f"{k}={v}" for k, v in sorted(plain.items())))
    return " ".join(parts)


def label_problems(bundle: Mapping[str, float], nodes: Sequence[NodeView], selector: Mapping[str, str]) -> list[str]:
    """The problem when no alive node matches the label selector (empty when one does).

    Args:
        bundle: The resources of one judge worker (for the ``ray start`` hint).
        nodes: The alive nodes.
        selector: ``resources.node_labels``.
    """
    if any(node_matches(n.labels, selector) for n in nodes):
        return []
    seen = sorted({f"{k}={v}" for n in nodes for k, v in user_labels(n.labels).items()})
    return [
        f"no alive node matches resources.node_labels ({describe_selector(selector)}); labels on "
        f"the nodes: {', '.join(seen) or '(none)'}: start judge nodes with "
        f"`{_start_hint(bundle, selector)}` or change node_labels"
    ]


def fit_problems(
    bundle: Mapping[str, float],
    groups: int,
    bundles_per_group: int,
    strategy: str,
    nodes: Sequence[NodeView],
    selector: Mapping[str, str],
) -> list[str]:
    """Why ``groups`` placement groups of ``bundles_per_group`` bundles cannot fit the nodes.

    Args:
        bundle: The resources of one bundle (one judge worker).
        groups: How many groups (1, or one per replica for tensor parallelism over nodes).
        bundles_per_group: Bundles in each group.
        strategy: The groups' strategy (``STRICT_PACK``, ``PACK``, ``SPREAD``, ``STRICT_SPREAD``).
        nodes: The alive nodes.
        selector: The label selector every bundle's node must match (empty: any node).

    Returns:
        One sentence per problem, naming what is missing and how to add it; empty when it fits.
    """
    where = f"labelled {describe_selector(selector)}" if selector else ""
    eligible = [n for n in nodes if node_matches(n.labels, selector)]
    if not eligible:
        return label_problems(bundle, nodes, selector)
    capacity = sorted((n.holds(bundle) for n in eligible), reverse=True)
    total = groups * bundles_per_group
    one = format_resources(bundle)
    if capacity[0] == 0:
        return [
            f"no node {where or 'in the cluster'} can hold one judge worker ({one}): missing "
            f"{_shortfall(bundle, eligible)}; add such a node (`{_start_hint(bundle, selector)}`) "
            "or lower resources.cpus_per_replica / gpus_per_replica / custom_resources"
        ]
    nodes_word = f"nodes {where}" if where else "nodes"
    if bundles_per_group > 1 and strategy == "STRICT_PACK" and groups > 1:
        placed = sum(c // bundles_per_group for c in capacity)
        if placed < groups:
            return [
                f"each tensor-parallel replica needs {bundles_per_group} workers ({one} each) on one node; "
                f"the {nodes_word} hold {placed} such replica(s) of {groups}: add nodes or lower "
                "resources.num_replicas"
            ]
        return []
    if strategy == "STRICT_PACK" and capacity[0] < total:
        return [
            f"resources.strategy STRICT_PACK (num_nodes 1) puts all {total} judge workers ({one} each) on "
            f"one node, but the best of the {nodes_word} holds {capacity[0]}: raise num_nodes, or lower "
            "resources.num_replicas or the resources per worker"
        ]
    if strategy == "STRICT_SPREAD":
        able = sum(1 for c in capacity if c >= 1)
        if able < total:
            return [
                f"resources.strategy STRICT_SPREAD puts each of {total} judge workers ({one} each) on a "
                f"node of its own, but {able} of the {nodes_word} can hold one: {total - able} more "
                f"node(s) needed (`{_start_hint(bundle, selector)}`), or lower resources.num_replicas"
            ]
        return []
    if sum(capacity) < total:
        return [
            f"the {nodes_word} hold {sum(capacity)} of the judge's {total} workers ({one} each): add "
            f"nodes (`{_start_hint(bundle, selector)}`) or lower resources.num_replicas"
        ]
    return []


def free_on_nodes(
    bundle: Mapping[str, float],
    nodes: Sequence[NodeView],
    free: Mapping[str, Mapping[str, float]],
    selector: Mapping[str, str],
    limit: int = 8,
) -> str:
    """What is free now of each resource a bundle needs, on each node the selector admits.

    Args:
        bundle: The resources of one judge worker.
        nodes: The alive nodes (totals and labels).
        free: Node id -> resources free now (``ray._private.state.available_resources_per_node()``).
        selector: ``resources.node_labels``.
        limit: Most nodes listed.

    Returns:
        ``node 1a2b3c4d: CPU 0 of 2, judge_slot 1 of 1; ...`` for messages.
    """
    parts = []
    for node in [n for n in nodes if node_matches(n.labels, selector)][:limit]:
        have = free.get(node.node_id, {})
        amounts = ", ".join(
            f"{kind} {float(have.get(kind, 0.0)):g} of {float(node.resources.get(kind, 0.0)):g}"
            for kind in sorted(bundle)
        )
        parts.append(f"node {node.node_id[:8]}: {amounts}")
    return "; ".join(parts) or "(no node)"
