"""Judge placement planning and start-up layout checks, without Ray."""

from __future__ import annotations

import pytest

from nemo_genrm.config import ConfigError, GenRMConfig, validate
from nemo_genrm.judges.placement import (
    ClusterView,
    colocated_problems,
    plan_separate,
    separate_problems,
)

ONE_NODE_4GPU = ClusterView(gpus=4, cpus=16, nodes=1, max_gpus_per_node=4)
TWO_NODES_8GPU = ClusterView(gpus=16, cpus=64, nodes=2, max_gpus_per_node=8)


def _cfg(tp: int = 1, backend: str = "dtensor", **resources) -> GenRMConfig:
    return validate(
        GenRMConfig,
        {
            "judge": {"backend": backend, "model_name": "m", "dtensor": {"tensor_parallel_size": tp}},
            "resources": resources,
        },
        prefix="env.genrm",
    )


def _plan(cfg: GenRMConfig):
    return plan_separate(cfg.judge, cfg.resources)


# ------------------------------------------------------------------------------- separate plans
@pytest.mark.parametrize(
    ("tp", "resources", "strategies", "slots", "bundle"),
    [
        # One node: one group, all on that node; replica r owns bundles [r*tp, (r+1)*tp).
        (
            1,
            {"num_replicas": 2, "gpus_per_replica": 1},
            ["STRICT_PACK"],
            [(0, (0,)), (0, (1,))],
            {"CPU": 1.0, "GPU": 1.0},
        ),
        (
            2,
            {"num_replicas": 2, "gpus_per_replica": 2},
            ["STRICT_PACK"],
            [(0, (0, 1)), (0, (2, 3))],
            {"CPU": 1.0, "GPU": 1.0},
        ),
        # 2 GPUs per replica without TP: one rank holding both GPUs.
        (1, {"num_replicas": 1, "gpus_per_replica": 2}, ["STRICT_PACK"], [(0, (0,))], {"CPU": 1.0, "GPU": 2.0}),
        # CPU only: CPU bundles, no GPU key at all.
        (
            2,
            {"num_replicas": 1, "gpus_per_replica": 0, "cpus_per_replica": 0.5},
            ["STRICT_PACK"],
            [(0, (0, 1))],
            {"CPU": 0.5},
        ),
        # Several nodes, no TP: one SPREAD group so replicas land on different nodes.
        (
            1,
            {"num_replicas": 4, "num_nodes": 2},
            ["SPREAD"],
            [(0, (0,)), (0, (1,)), (0, (2,)), (0, (3,))],
            {"CPU": 1.0, "GPU": 1.0},
        ),
        # Several nodes with TP: one STRICT_PACK group per replica (a replica's ranks share a node).
        (
            2,
            {"num_replicas": 2, "gpus_per_replica": 2, "num_nodes": 2},
            ["STRICT_PACK", "STRICT_PACK"],
            [(0, (0, 1)), (1, (0, 1))],
            {"CPU": 1.0, "GPU": 1.0},
        ),
    ],
)
def test_plan_separate(tp, resources, strategies, slots, bundle):
    plan = _plan(_cfg(tp=tp, **resources))
    assert [g.strategy for g in plan.groups] == strategies
    assert [tuple(s) for s in plan.replica_slots] == slots
    assert all(b == bundle for g in plan.groups for b in g.bundles)
    assert sum(len(g.bundles) for g in plan.groups) == resources.get("num_replicas", 1) * tp


def test_separate_fits_returns_no_problem():
    cfg = _cfg(num_replicas=2, gpus_per_replica=2)
    assert separate_problems(cfg.judge, cfg.resources, _plan(cfg), ONE_NODE_4GPU) == []


def test_separate_reports_every_problem_with_a_fix():
    # 3 x 2 GPUs on a 4-GPU cluster, 3 nodes asked of 1, 3 x 8 CPUs of 16: three problems at once.
    cfg = _cfg(num_replicas=3, gpus_per_replica=2, num_nodes=3, cpus_per_replica=8.0)
    problems = separate_problems(cfg.judge, cfg.resources, _plan(cfg), ONE_NODE_4GPU)
    assert len(problems) == 3, problems
    assert "needs 6 GPUs" in problems[0] and "has 4" in problems[0] and "lower num_replicas" in problems[0]
    assert "needs 24 CPUs" in problems[1]
    assert "num_nodes is 3" in problems[2] and "at most 1" in problems[2]


def test_separate_one_node_must_fit_on_the_largest_node():
    # 10 GPUs exist over two nodes of 8, but num_nodes 1 keeps the judge on one node.
    cfg = _cfg(num_replicas=5, gpus_per_replica=2)
    problems = separate_problems(cfg.judge, cfg.resources, _plan(cfg), TWO_NODES_8GPU)
    assert len(problems) == 1 and "largest node has 8" in problems[0] and "raise num_nodes" in problems[0]


def test_separate_tp_replica_must_fit_on_a_node():
    cfg = _cfg(tp=16, num_replicas=1, gpus_per_replica=16, num_nodes=2)
    problems = separate_problems(cfg.judge, cfg.resources, _plan(cfg), TWO_NODES_8GPU)
    assert any("one replica needs 16 GPUs on one node" in p for p in problems), problems


def test_tp_not_dividing_gpus_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        _cfg(tp=2, gpus_per_replica=3)
    assert any("multiple of the tensor parallel size (2)" in p for p in err.value.problems)


# ------------------------------------------------------------------------------------ colocated
POLICY_GROUP = [{"CPU": 2.0, "GPU": 1.0}] * 4


def test_colocated_fits():
    cfg = _cfg(placement="colocated", num_replicas=2, gpu_fraction=0.3)
    free = [{"GPU": 0.5, "CPU": 1.0}] * 4
    assert colocated_problems(cfg.judge, cfg.resources, POLICY_GROUP, free=free, policy_gpu_fraction=0.5) == []


def test_colocated_fractions_over_one():
    cfg = _cfg(placement="colocated", gpu_fraction=0.6)
    problems = colocated_problems(cfg.judge, cfg.resources, POLICY_GROUP, policy_gpu_fraction=0.5)
    assert len(problems) == 1
    assert "0.6 + policy fraction 0.5 = 1.1 > 1" in problems[0] and "at most 0.5" in problems[0]


def test_colocated_bundle_free_share_too_small():
    # The policy already holds 0.8 of bundle 0: only 0.2 left for a judge asking 0.3.
    cfg = _cfg(placement="colocated", gpu_fraction=0.3, cpus_per_replica=1.0)
    free = [{"GPU": 0.2, "CPU": 0.5}] + [{"GPU": 1.0, "CPU": 2.0}] * 3
    problems = colocated_problems(cfg.judge, cfg.resources, POLICY_GROUP, free=free)
    assert len(problems) == 2, problems
    assert "bundle 0 has 0.2 GPU free" in problems[0] and "at most 0.2" in problems[0]
    assert "bundle 0 has 0.5 CPU free" in problems[1] and "cpus_per_replica to at most 0.5" in problems[1]


def test_colocated_more_ranks_than_gpu_bundles():
    # 2 replicas x TP 4 = 8 ranks, the policy group has 4 GPU bundles (and CPU-only bundles do not count).
    cfg = _cfg(tp=4, placement="colocated", num_replicas=2, gpus_per_replica=4)
    problems = colocated_problems(cfg.judge, cfg.resources, [*POLICY_GROUP, {"CPU": 4.0}])
    assert len(problems) == 1 and "needs 8 GPU bundle(s)" in problems[0] and "has 4" in problems[0]


def test_colocated_gpus_per_replica_must_equal_tp():
    cfg = _cfg(placement="colocated", gpus_per_replica=2)
    problems = colocated_problems(cfg.judge, cfg.resources, POLICY_GROUP)
    assert len(problems) == 1 and "must equal the tensor parallel size (1)" in problems[0]


def test_colocated_on_cpu_only_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        _cfg(placement="colocated", gpus_per_replica=0)
    assert any("use placement: separate" in p for p in err.value.problems)


def test_import_nemo_genrm_stays_light():
    import subprocess
    import sys

    import nemo_genrm

    code = "import sys, nemo_genrm\nassert not {'ray', 'torch', 'transformers'} & set(sys.modules)\n"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    # The environment resolves lazily, on first access.
    assert hasattr(nemo_genrm.GenRMEnvironment, "remote")
    assert nemo_genrm.GenRMEnvironmentImpl.__module__ == "nemo_genrm.env.environment"
