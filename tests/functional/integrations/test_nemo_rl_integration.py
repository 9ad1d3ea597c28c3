"""Registration into NeMo-RL's real registries (the tests marked ``nemo_rl`` run in the env
``ci/nemo_rl/build_env.sh`` builds from NeMo-RL's source), and the message without NeMo-RL.

``tests/functional/env/test_environment.py`` starts its environment actor the way NeMo-RL's
``create_env`` does (``get_object(ACTOR_FQN).options(runtime_env={"py_executable": ...})``).
"""

from __future__ import annotations

import sys

import pytest

from nemo_genrm.integrations import nemo_rl as integration


def test_register_without_nemo_rl_says_how_to_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "nemo_rl", None)  # makes `import nemo_rl...` raise ImportError
    with pytest.raises(ImportError, match=r"needs NeMo-RL .*examples/run_grpo_genrm\.py"):
        integration.register()


@pytest.fixture
def registries():
    """NeMo-RL's two registries, with whatever a test registers taken out again."""
    from nemo_rl.distributed.ray_actor_environment_registry import ACTOR_ENVIRONMENT_REGISTRY
    from nemo_rl.environments.utils import ENV_REGISTRY

    envs, actors = dict(ENV_REGISTRY), dict(ACTOR_ENVIRONMENT_REGISTRY)
    yield ENV_REGISTRY, ACTOR_ENVIRONMENT_REGISTRY
    for registry, before in ((ENV_REGISTRY, envs), (ACTOR_ENVIRONMENT_REGISTRY, actors)):
        registry.clear()
        registry.update(before)


@pytest.mark.nemo_rl
def test_register_fills_both_registries_once(registries):
    from nemo_rl.distributed.ray_actor_environment_registry import get_actor_python_env
    from nemo_rl.distributed.virtual_cluster import PY_EXECUTABLES

    env_registry, _ = registries
    name = "genrm_test_registration"
    fqn = integration.register(name=name)
    assert fqn == "nemo_genrm.environment.GenRMEnvironment"
    assert env_registry[name] == {"actor_class_fqn": fqn}
    assert get_actor_python_env(fqn) == PY_EXECUTABLES.SYSTEM
    # Idempotent: NeMo-RL's register_env (which refuses a second registration) is not called again.
    assert integration.register(name=name) == fqn
    integration.register(name=name + "_2")
    assert env_registry[name + "_2"] == {"actor_class_fqn": fqn}


@pytest.mark.nemo_rl
def test_register_refuses_a_name_taken_by_another_env(registries):
    env_registry, _ = registries
    taken = next(name for name, entry in env_registry.items() if entry["actor_class_fqn"] != integration.ACTOR_FQN)
    with pytest.raises(ValueError, match=f"'{taken}' is already registered for"):
        integration.register(name=taken)
