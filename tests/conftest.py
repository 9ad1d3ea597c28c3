"""Shared test set-up: offline everything, one Ray cluster per session, GPU/vLLM markers."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Set before anything imports transformers, datasets or wandb: nothing may wait on a network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Tiny models on a 2-core machine run fastest single-threaded; several Ray workers share the cores.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

# Virtual GPUs declared to Ray so placement tests can check where actors land on a CPU machine.
RAY_TEST_CPUS = 16
RAY_TEST_GPUS = 4


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch is a hard dependency
        return False


# NeMo-RL's source snapshot beside the checkout (see ci/nemo_rl/), used when none is installed.
# NeMo-RL's source snapshot beside the checkout, or wherever NEMO_RL_SRC says (as .ci/run reads it).
NEMO_RL_SNAPSHOT = Path(
    os.environ.get("NEMO_RL_SRC", Path(__file__).resolve().parents[2] / "shared" / "nemo_rl_src")
).resolve()


def nemo_rl_unavailable() -> str | None:
    """Why tests marked ``nemo_rl`` cannot run here, or ``None`` when NeMo-RL is usable.

    An installed ``nemo_rl`` is used first; else the snapshot at :data:`NEMO_RL_SNAPSHOT` is put
    on ``sys.path`` when this interpreter can run it (NeMo-RL needs Python >= 3.13).
    """
    if importlib.util.find_spec("nemo_rl") is None:
        if not (NEMO_RL_SNAPSHOT / "nemo_rl").is_dir():
            return "needs NeMo-RL: not installed and no source snapshot at " + str(NEMO_RL_SNAPSHOT)
        if sys.version_info < (3, 13):
            return (
                f"needs NeMo-RL, which needs Python >= 3.13 (this is {sys.version_info[0]}."
                f"{sys.version_info[1]}); CI runs these tests in the env ci/nemo_rl/build_env.sh builds"
            )
        sys.path.insert(0, str(NEMO_RL_SNAPSHOT))
    try:
        importlib.import_module("nemo_rl.environments.utils")
    except Exception as exc:  # its own import-time checks (transformers pin, ...) say why
        return f"needs a working NeMo-RL: importing it failed ({type(exc).__name__}: {exc})"
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Give the session a tiny-model cache folder of its own unless ``NEMO_GENRM_CACHE`` names one
    (before any test, so the background build below and every test share it)."""
    if not os.environ.get("NEMO_GENRM_CACHE"):
        os.environ["NEMO_GENRM_CACHE"] = tempfile.mkdtemp(prefix="nemo_genrm_tiny_")
        config.stash[_OWN_CACHE] = os.environ["NEMO_GENRM_CACHE"]


# The demo judge trains for minutes on one thread (nemo_genrm.demo.models). Tests marked
# `demo_models` run last, and a background process trains the demo models from the session's
# start on the other core; the cache's lock makes a test that asks for them meanwhile wait for
# that build rather than train them again (nemo_genrm.testing.cache).
_OWN_CACHE = pytest.StashKey[str]()
_DEMO_BUILDER = pytest.StashKey[subprocess.Popen]()
_TESTS_NICENESS = 10  # CFS weight 110 against the builder's 1024
_DEMO_BUILD = """
import os, signal, sys, threading, time

# Stopped (SIGTERM), or its test session gone however it ended: exit through Python, so the
# cache's half-built temporary folder is removed, and never train on as an orphan.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
parent = os.getppid()

def watch():
    while os.getppid() == parent:
        time.sleep(2)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, daemon=True).start()
from nemo_genrm.demo.models import cached_demo_judge, cached_demo_policy

cached_demo_policy()
cached_demo_judge()
"""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the background build of the demo models when a selected test needs them."""
    if session.config.option.collectonly:
        return
    if not any(item.get_closest_marker("demo_models") for item in session.items):
        return
    # Every worker collects every test, so each sees this; one starts the builder, the others wait
    # on the cache's lock if they need the models.
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":
        log = open(Path(os.environ["NEMO_GENRM_CACHE"]) / "demo-models-build.log", "w")  # noqa: SIM115
        session.config.stash[_DEMO_BUILDER] = subprocess.Popen(
            [sys.executable, "-c", _DEMO_BUILD], stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
    # The build is the session's longest chain (minutes on one core, and the last tests wait for
    # it): the test processes, and all they start, yield the CPU to it. Measured on 2 cores with
    # two workers at the builder's priority, it took most of the suite and those tests waited 402 s.
    os.nice(_TESTS_NICENESS)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers, or one per core under two cores.

    Most of a functional test is waiting (a Ray cluster, a subprocess, an actor starting), so one
    process keeps a 2-core machine about 60% busy; two fill it. Each worker starts a Ray cluster
    of its own (16 CPUs, 4 virtual GPUs), so more would cost memory rather than time.
    """
    return max(1, min(2, os.cpu_count() or 1))


def pytest_unconfigure(config: pytest.Config) -> None:
    builder = config.stash.get(_DEMO_BUILDER, None)
    if builder is not None and builder.poll() is None:
        builder.terminate()  # the session ended first (interrupted, or -x): no orphan keeps training
        builder.wait(timeout=30)
    if (own := config.stash.get(_OWN_CACHE, None)) is not None:
        shutil.rmtree(own, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip GPU, vLLM and NeMo-RL tests cleanly, with the reason, where the machine lacks them;
    run the tests marked ``demo_models`` last (their models train in the background meanwhile)."""
    items.sort(key=lambda item: item.get_closest_marker("demo_models") is not None)  # stable: order kept
    has_cuda = _has_cuda()
    has_vllm = importlib.util.find_spec("vllm") is not None
    nemo_rl_reason = nemo_rl_unavailable() if any("nemo_rl" in i.keywords for i in items) else None
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "vllm" in item.keywords and not (has_vllm and has_cuda):
            item.add_marker(pytest.mark.skip(reason="needs vLLM and a CUDA GPU"))
        if "nemo_rl" in item.keywords and nemo_rl_reason is not None:
            item.add_marker(pytest.mark.skip(reason=nemo_rl_reason))


def start_session_ray() -> None:
    """Start the session's local Ray cluster (16 CPUs, 4 virtual GPUs) in this process.

    Also called by tests that stopped it to run a cluster of their own (tests/functional/
    test_scale_out.py), so the tests after them find it as they expect.
    """
    import ray

    from nemo_genrm.ray_runtime import job_runtime_env

    # A loaded 2-core machine occasionally times out Ray's node start-up; one retry covers it.
    for attempt in range(2):
        try:
            ray.init(
                # A fresh cluster of the tests' own, even where another one runs on the
                # machine (a `ray start` cluster would otherwise be joined, with its resources).
                address="local",
                num_cpus=RAY_TEST_CPUS,
                num_gpus=RAY_TEST_GPUS,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                # Under `uv run pytest` (CI), the job's folder is used in place, not uploaded.
                runtime_env=job_runtime_env(),
            )
            break
        except Exception:
            ray.shutdown()
            if attempt == 1:
                raise


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster shared by every functional test (16 CPUs, 4 virtual GPUs).

    Tests that need other resources start their own cluster after calling ``ray.shutdown()``
    and start this one again with :func:`start_session_ray` when they are done.
    """
    import ray

    if not ray.is_initialized():
        start_session_ray()
    yield ray
    # Shut down at the very end of the session only.


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    try:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    except Exception:
        pass


@pytest.fixture(scope="session")
def tiny_cache_dir() -> str:
    """Where tiny models are built once per session (shared by every test; see pytest_configure)."""
    return os.environ["NEMO_GENRM_CACHE"]
