"""Which nodes a judge may use: strategies, node labels, custom resources, and what is missing
when a layout fits no node (pure planning, no Ray; the same on a simulated cluster in
tests/functional/test_scale_out.py)."""

from __future__ import annotations

import pytest

from nemo_genrm.config import ConfigError, GenRMConfig, validate
from nemo_genrm.config.labels import node_matches, selector_problems
from nemo_genrm.judges.node_fit import ClusterView, NodeView, fit_problems, free_on_nodes, label_problems
from nemo_genrm.judges.placement import plan_separate, separate_problems

JUDGE = {"ray.io/node-id": "x", "genrm-role": "judge"}
# Three CPU nodes: two judge nodes with a judge_slot each, one policy node without.
NODES = (
    NodeView("aaaa0001", {"CPU": 2.0, "judge_slot": 1.0}, {**JUDGE, "zone": "a"}),
    NodeView("aaaa0002", {"CPU": 2.0, "judge_slot": 1.0}, {**JUDGE, "zone": "b"}),
    NodeView("aaaa0003", {"CPU": 4.0}, {"genrm-role": "policy", "zone": "c"}),
)
CLUSTER = ClusterView(
    gpus=0, cpus=8, nodes=3, max_gpus_per_node=0, totals={"CPU": 8.0, "judge_slot": 2.0}, node_list=NODES
)


def _cfg(tp: int = 1, **resources) -> GenRMConfig:
    return validate(
        GenRMConfig,
        {
            "judge": {"model_name": "m", "dtensor": {"tensor_parallel_size": tp}},
            "resources": {"gpus_per_replica": 0, **resources},
        },
        prefix="env.genrm",
    )


def _problems(**resources) -> list[str]:
    cfg = _cfg(**resources)
    return separate_problems(cfg.judge, cfg.resources, plan_separate(cfg.judge, cfg.resources), CLUSTER)


# ----------------------------------------------------------------------------------- selectors
@pytest.mark.parametrize(
    ("selector", "labels", "match"),
    [
        ({"zone": "a"}, {"zone": "a"}, True),  # equal value
        ({"zone": "a"}, {"zone": "b"}, False),  # another value
        ({"zone": "a"}, {}, False),  # no such label
        ({"zone": "!a"}, {"zone": "b"}, True),  # not a
        ({"zone": "!a"}, {}, True),  # no label: not a either
        ({"zone": "!a"}, {"zone": "a"}, False),
        ({"zone": "in(a,c)"}, {"zone": "c"}, True),  # one of the set
        ({"zone": "in(a, c)"}, {"zone": "b"}, False),
        ({"zone": "!in(a,c)"}, {"zone": "b"}, True),  # none of the set
        ({"zone": "!in(a,c)"}, {"zone": "a"}, False),
        ({"zone": "a", "genrm-role": "judge"}, {"zone": "a", "genrm-role": "policy"}, False),  # every key must hold
        ({}, {"zone": "a"}, True),  # no selector: any node
    ],
)
def test_node_matches(selector, labels, match):
    assert node_matches(labels, selector) is match


def test_selector_syntax_problems_name_every_bad_key_and_condition():
    problems = selector_problems(
        {"zone": "in(a,", "bad key!": "x", "ok": "!in(a,b)", "tier": "-x"}, "serve.node_labels"
    )
    assert len(problems) == 3, problems
    assert "serve.node_labels: zone='in(a,' is not a label condition" in problems[0]
    assert "serve.node_labels: 'bad key!' is not a label key" in problems[1]
    assert "tier='-x' is not a label condition" in problems[2]


def test_config_reports_every_pinning_problem_at_once():
    with pytest.raises(ConfigError) as err:
        _cfg(
            num_replicas=3,
            num_nodes=2,
            strategy="STRICT_SPREAD",
            node_labels={"zone": "in("},
            custom_resources={"GPU": 1, "judge_slot": 0},
        )
    text = "\n".join(err.value.problems)
    assert len(err.value.problems) == 4, err.value.problems
    assert "resources.node_labels: zone='in(' is not a label condition" in text
    assert "resources.custom_resources: GPU is Ray's own resource" in text
    assert "resources.custom_resources: judge_slot must be > 0" in text
    assert "STRICT_SPREAD puts each of the judge's 3 workers on a node of its own: set num_nodes to 3" in text


@pytest.mark.parametrize(
    ("resources", "tp", "fragment"),
    [
        # A colocated judge lives in the policy's group: it cannot pick nodes.
        (
            {"placement": "colocated", "gpus_per_replica": 1, "node_labels": {"zone": "a"}},
            1,
            "resources.node_labels: a colocated judge runs in the policy's placement group",
        ),
        ({"strategy": "STRICT_PACK", "num_nodes": 2, "num_replicas": 2}, 1, "STRICT_PACK keeps the judge on one node"),
        ({"strategy": "SPREAD", "num_replicas": 2}, 1, "num_nodes is 1 (one node)"),
        ({"strategy": "SPREAD", "num_replicas": 2, "num_nodes": 2}, 2, "one STRICT_PACK group per replica"),
    ],
)
def test_contradictory_pinning_is_a_config_error(resources, tp, fragment):
    with pytest.raises(ConfigError) as err:
        _cfg(tp=tp, **resources)
    assert any(fragment in p for p in err.value.problems), err.value.problems


# ---------------------------------------------------------------------------------------- plans
def test_plan_carries_strategy_labels_and_custom_resources_to_every_bundle():
    cfg = _cfg(
        num_replicas=3,
        num_nodes=3,
        strategy="STRICT_SPREAD",
        node_labels={"genrm-role": "judge"},
        custom_resources={"judge_slot": 1},
    )
    plan = plan_separate(cfg.judge, cfg.resources)
    (group,) = plan.groups
    assert group.strategy == "STRICT_SPREAD" and dict(group.label_selector) == {"genrm-role": "judge"}
    assert list(group.bundles) == [{"CPU": 1.0, "judge_slot": 1.0}] * 3


def test_auto_strategy_is_unchanged():
    # auto: STRICT_PACK on one node, SPREAD over several (as before the option existed).
    assert plan_separate(*_pair(_cfg(num_replicas=2))).groups[0].strategy == "STRICT_PACK"
    assert plan_separate(*_pair(_cfg(num_replicas=2, num_nodes=2))).groups[0].strategy == "SPREAD"


def _pair(cfg: GenRMConfig):
    return cfg.judge, cfg.resources


# ---------------------------------------------------------------------------------- fit checks
def test_layouts_that_fit_the_nodes_have_no_problem():
    assert _problems(num_replicas=2, num_nodes=2, custom_resources={"judge_slot": 1}) == []
    assert _problems(num_replicas=4, num_nodes=1, node_labels={"zone": "c"}) == []  # 4 CPUs on n3
    assert _problems(num_replicas=2, num_nodes=2, strategy="STRICT_SPREAD", node_labels=JUDGE_SELECTOR) == []


JUDGE_SELECTOR = {"genrm-role": "judge"}


@pytest.mark.parametrize(
    ("resources", "named"),
    [
        # The cluster has 2 judge_slot in all.
        (
            {"num_replicas": 3, "num_nodes": 3, "custom_resources": {"judge_slot": 1}},
            ["needs 3 judge_slot", "the Ray cluster has 2", "ray start --resources"],
        ),
        # No node is in zone d; the message lists the labels there are.
        (
            {"node_labels": {"zone": "d"}},
            ["no alive node matches", "zone=d", "genrm-role=judge", "zone=a", "--labels=zone=d"],
        ),
        # Each judge node has 2 CPUs: 3 workers of one node each need 3 judge nodes.
        (
            {"num_replicas": 3, "num_nodes": 3, "strategy": "STRICT_SPREAD", "node_labels": JUDGE_SELECTOR},
            ["STRICT_SPREAD", "2 of the nodes labelled genrm-role=judge can hold one", "1 more node(s)"],
        ),
        # One node, zone a, holds 2 workers of 1 CPU, not 3.
        ({"num_replicas": 3, "node_labels": {"zone": "a"}}, ["STRICT_PACK", "holds 2", "raise num_nodes"]),
        # SPREAD over the judge nodes: 4 CPUs there, 5 workers asked.
        (
            {"num_replicas": 5, "num_nodes": 2, "node_labels": JUDGE_SELECTOR},
            ["hold 4 of the judge's 5 workers", "labelled genrm-role=judge"],
        ),
        # No judge node has 3 CPUs.
        (
            {"cpus_per_replica": 3.0, "node_labels": JUDGE_SELECTOR},
            ["can hold one judge worker ({CPU: 3})", "CPU (needs 3; the most one node has is 2)", "--num-cpus=3"],
        ),
    ],
)
def test_a_layout_no_node_can_hold_names_what_is_missing(resources, named):
    problems = _problems(**resources)
    assert len(problems) == 1, problems
    for text in named:
        assert text in problems[0], problems[0]


def test_a_tensor_parallel_replica_needs_its_ranks_on_one_node():
    nodes = (NodeView("n1", {"CPU": 2.0}), NodeView("n2", {"CPU": 1.0}), NodeView("n3", {"CPU": 1.0}))
    # Two replicas of 2 ranks, a STRICT_PACK group each: only n1 holds a whole replica.
    problems = fit_problems({"CPU": 1.0}, 2, 2, "STRICT_PACK", nodes, {})
    assert len(problems) == 1 and "hold 1 such replica(s) of 2" in problems[0]
    assert fit_problems({"CPU": 1.0}, 1, 2, "STRICT_PACK", nodes, {}) == []


def test_unmatched_labels_are_reported_beside_other_problems():
    problems = _problems(num_replicas=1, cpus_per_replica=9.0, node_labels={"zone": "z"})
    assert len(problems) == 2 and "needs 9 CPUs" in problems[0] and "no alive node matches" in problems[1]
    assert label_problems({"CPU": 1.0}, NODES, {"zone": "a"}) == []


def test_free_on_nodes_lists_what_each_eligible_node_has_free():
    free = {"aaaa0001": {"CPU": 0.0, "judge_slot": 1.0}, "aaaa0002": {"CPU": 2.0}}
    text = free_on_nodes({"CPU": 1.0, "judge_slot": 1.0}, NODES, free, JUDGE_SELECTOR)
    assert text == ("node aaaa0001: CPU 0 of 2, judge_slot 1 of 1; node aaaa0002: CPU 2 of 2, judge_slot 0 of 1")
