"""What /health says about the service's replicas, and the service's placement options (no Ray).

The same on a simulated multi-node cluster, a node lost: tests/functional/test_scale_out.py.
"""

from __future__ import annotations

import pytest

from nemo_genrm.config import ConfigError, validate
from nemo_genrm.serve.config import ServiceConfig
from nemo_genrm.serve.fleet import FleetState, with_fleet
from nemo_genrm.serve.service import replica_actor_options

READY = (200, {"status": "ready", "model": "judge"})


@pytest.mark.parametrize(
    ("engine", "fleet", "status", "state", "reason"),
    [
        # Every replica running: the engine's word stands.
        (READY, FleetState(3, {"RUNNING": 3}), 200, "ready", None),
        # One lost with its node, its replacement starting: degraded, still answering.
        (READY, FleetState(3, {"RUNNING": 2, "STARTING": 1}), 200, "degraded", "2 of 3 replicas running (1 starting)"),
        # Lost and not replaced yet (the controller has not noticed): degraded all the same.
        (READY, FleetState(2, {"RUNNING": 1}), 200, "degraded", "1 of 2 replicas running"),
        # A dead engine stays dead (503) and keeps its own reason.
        (
            (503, {"status": "dead", "model": "judge", "reason": "engine raised"}),
            FleetState(2, {"RUNNING": 1}),
            503,
            "dead",
            "engine raised",
        ),
        # More running than asked (a rolling update): nothing missing.
        (READY, FleetState(2, {"RUNNING": 3}), 200, "ready", None),
    ],
)
def test_health_with_the_fleet(engine, fleet, status, state, reason):
    code, body = with_fleet(*engine, fleet)
    assert (code, body["status"], body.get("reason")) == (status, state, reason)
    assert body["replicas"]["target"] == fleet.target and body["replicas"]["running"] == fleet.running


def test_health_without_a_fleet_reading_is_the_engine_alone():
    assert with_fleet(*READY, None) == READY


def _service(**serve) -> ServiceConfig:
    return validate(ServiceConfig, {"judge": {"model_name": "m"}, "serve": serve})


def test_replica_options_carry_resources_and_labels():
    cfg = _service(num_cpus_per_replica=2, node_labels={"genrm-role": "judge"}, custom_resources={"judge_slot": 1})
    options = replica_actor_options(cfg.serve)
    assert options["num_cpus"] == 2 and options["num_gpus"] == 0
    assert options["resources"] == {"judge_slot": 1.0} and options["label_selector"] == {"genrm-role": "judge"}
    assert "py_executable" in options["runtime_env"]
    plain = replica_actor_options(_service().serve)
    assert "resources" not in plain and "label_selector" not in plain


def test_service_placement_problems_come_together():
    with pytest.raises(ConfigError) as err:
        _service(
            node_labels={"zone": "in(a"},
            custom_resources={"CPU": 1},
            max_replicas_per_node=0,
            proxy_location="Everywhere",
        )
    text = "\n".join(err.value.problems)
    assert "proxy_location" in text and "max_replicas_per_node" in text
    assert "serve.node_labels: zone='in(a' is not a label condition" in text
    assert "serve.custom_resources.CPU" in text
