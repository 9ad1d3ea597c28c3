"""The import paths users, the docs and NeMo-RL's registry name keep working, whatever moves inside.

Modules inside the package may move between packages (``tests/unit/test_import_graph.py`` keeps
the layers); these paths may not: they are written in users' launchers and YAML, in README.md
and docs/, and in NeMo-RL's ``ENV_REGISTRY`` (the actor class path
``nemo_genrm.environment.GenRMEnvironment``).
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import nemo_genrm

# module -> the names users import from it (README.md, docs/*.md, examples/).
PUBLIC: dict[str, tuple[str, ...]] = {
    "nemo_genrm": ("GenRMEnvironment", "GenRMEnvironmentImpl", "__version__"),
    "nemo_genrm.environment": ("GenRMEnvironment", "GenRMEnvironmentImpl", "MAX_CONCURRENCY"),
    "nemo_genrm.config": (
        "ConfigError",
        "GenRMConfig",
        "JudgeConfig",
        "PromptConfig",
        "RewardBenchConfig",
        "StrictModel",
        "VerdictConfig",
        "load_config",
        "to_container",
        "validate",
    ),
    "nemo_genrm.serve": (
        "ServeConfig",
        "ServiceConfig",
        "load_service_config",
        "start_judge_service",
        "stop_judge_service",
        "wait_until_healthy",
    ),
    "nemo_genrm.testing": ("TinyModelSpec", "cached_tiny_judge", "cached_tiny_model", "make_tiny_tokenizer"),
    "nemo_genrm.integrations.judge_reward": ("JudgeReward", "Judgement", "genrm_section"),
    "nemo_genrm.integrations.nemo_rl": ("ACTOR_FQN", "register"),
    "nemo_genrm.integrations.nemo_rl_metrics": ("GenRMMetricsLogger", "log_genrm_metrics"),
    "nemo_genrm.integrations.nemo_rl_processor": ("genrm_math_data_processor", "register_processor"),
    "nemo_genrm.integrations.processes": ("Processes", "current_processes"),
    "nemo_genrm.integrations.trl": ("GenRMReward",),
    "nemo_genrm.integrations.verl": ("compute_score", "result_fields"),
    "nemo_genrm.integrations.verl_groups": ("GatheredReward", "gathered_reward"),
}
# Need their framework, which only the drop-ins environment (ci/dropins/) has; its suite drives them.
NEMO_GYM = ("nemo_genrm.integrations.nemo_gym", ("GenRMResourcesServer", "main"))
VERL_MANAGER = ("nemo_genrm.integrations.verl_manager", ("GenRMRewardManager", "exclude_unmeasured_kv"))


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_module_offers_its_names(module: str) -> None:
    loaded = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(loaded, name)]
    assert not missing, f"{module} lost {missing}"
    for name in getattr(loaded, "__all__", ()):
        assert hasattr(loaded, name), f"{module}.__all__ names {name!r}, which it lacks"


@pytest.mark.parametrize(("framework", "path"), [("nemo_gym", NEMO_GYM), ("verl", VERL_MANAGER)], ids=["gym", "verl"])
def test_dropin_paths_that_import_their_framework(framework: str, path: tuple[str, tuple[str, ...]]) -> None:
    pytest.importorskip(framework, reason=f"{framework} is in the drop-ins environment only (ci/dropins/)")
    module, names = path
    loaded = importlib.import_module(module)
    assert all(hasattr(loaded, name) for name in names)


def test_every_integration_module_is_a_public_path() -> None:
    import nemo_genrm.integrations as integrations

    found = {f"nemo_genrm.integrations.{m.name}" for m in pkgutil.iter_modules(integrations.__path__)}
    assert found == {m for m in PUBLIC if m.startswith("nemo_genrm.integrations.")} | {NEMO_GYM[0], VERL_MANAGER[0]}


def test_the_registered_actor_class_path_is_the_environment() -> None:
    from nemo_genrm.integrations.nemo_rl import ACTOR_FQN

    assert ACTOR_FQN == "nemo_genrm.environment.GenRMEnvironment"  # NeMo-RL users' configs name it
    module, _, name = ACTOR_FQN.rpartition(".")
    actor = getattr(importlib.import_module(module), name)
    assert actor is nemo_genrm.GenRMEnvironment
    assert hasattr(actor, "remote")  # the Ray actor class, not the plain one


def test_python_m_nemo_genrm_serve_runs_the_service_cli() -> None:
    # `python -m nemo_genrm.serve` is how docs/serving.md starts the service.
    done = subprocess.run(
        [sys.executable, "-m", "nemo_genrm.serve", "--help"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "--config" in done.stdout
