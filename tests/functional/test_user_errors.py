"""One mistake, as a user's terminal shows it: one typed error with its fix, in a screenful.

Each test runs what a user runs, in a subprocess, and reads everything it printed (stdout and
stderr together): a small script run with ``uv run python script.py`` from the project (as
``tests/functional/test_readme_snippet.py`` does, every ``RAY_*`` variable removed, as in a
user's shell), an entry point with a bad override, or (marked ``nemo_rl``, run in the NeMo-RL
suite's environment) a NeMo-RL launcher calling ``create_env``. The output must hold the package's
message, no ``Fatal Python error`` and no C++ ``Stack trace`` (Ray prints both when a threaded
actor dies in its constructor), and at most :data:`SCREENFUL` lines.

Mistakes caught in the driver start no Ray cluster. The others join the test session's Ray
cluster (``RAY_ADDRESS``, as a user on a cluster does), so no test pays for a cluster start.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENFUL = 25
"""Most lines one mistake may print."""

MISSING_JUDGE = "/models/my-judge"
"""A judge path that does not exist."""


@pytest.fixture
def shell(tiny_cache_dir):
    """A user's shell: no ``RAY_*`` variable, no active virtual environment; offline.

    ``TMPDIR`` is a fresh folder, so a script that starts Ray starts its own cluster: Ray joins
    the last cluster ``ray start`` left in ``$TMPDIR/ray`` (a test machine may run other jobs').
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.pop("VIRTUAL_ENV", None)
    env["NEMO_GENRM_CACHE"] = tiny_cache_dir
    tmp = tempfile.mkdtemp(prefix="ue", dir="/tmp")  # short: Ray's socket paths live under it
    env["TMPDIR"] = tmp
    yield env
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def cluster_shell(shell, ray_cluster):
    """A user's shell on a running Ray cluster: ``RAY_ADDRESS`` names the test session's, and
    ``RAY_AUTH_MODE`` is the one it was started with (``token`` when Ray enabled token
    authentication for it, which a process joining it must then say too)."""
    joined = {"RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address}
    if "RAY_AUTH_MODE" in os.environ:
        joined["RAY_AUTH_MODE"] = os.environ["RAY_AUTH_MODE"]
    return {**shell, **joined}


def run_as_user(args: list[str], env: dict[str, str], timeout_s: float = 300) -> tuple[int, str]:
    """Run ``python <args>`` as a user would (``uv run`` when uv is on PATH) from the project."""
    uv = shutil.which("uv")
    command = [uv, "run", "--project", str(ROOT), "python", *args] if uv else [sys.executable, *args]
    proc = subprocess.run(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s
    )
    return proc.returncode, proc.stdout


def assert_one_error(rc: int, output: str, *expected: str) -> None:
    """The run failed with the package's message, no abort, within a screenful."""
    shown = f"exit code {rc}, {len(output.splitlines())} lines:\n{output}"
    assert rc != 0, shown
    for text in expected:
        assert text in output, f"missing {text!r}; {shown}"
    for abort in ("Fatal Python error", "Stack trace", "SIGABRT", "ActorDiedError"):
        assert abort not in output, f"{abort!r} printed; {shown}"
    assert len(output.splitlines()) <= SCREENFUL, shown


def run_script(tmp_path: Path, env: dict[str, str], code: str) -> tuple[int, str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return run_as_user([str(script)], env)


# ----------------------------------------------------------------- a user's script, start()
def test_script_with_a_misspelt_key_fails_before_ray_starts(tmp_path, shell):
    rc, out = run_script(
        tmp_path,
        shell,
        """
        from nemo_genrm import GenRMEnvironment

        env = GenRMEnvironment.start({
            "judge": {"model_name": "Qwen/Qwen2.5-1.5B-Instruct"},
            "num_workers": 3,
        })
    """,
    )
    assert_one_error(rc, out, "nemo_genrm.errors.ConfigError", "env.genrm.num_workers: unknown key; valid keys:")
    assert "Ray cluster" not in out  # none was started


@pytest.mark.slow
def test_script_asking_for_more_gpus_than_the_cluster_has(tmp_path, cluster_shell, ray_cluster):
    gpus = int(ray_cluster.cluster_resources().get("GPU", 0)) + 1  # one more than the cluster has
    rc, out = run_script(
        tmp_path,
        cluster_shell,
        f"""
        from nemo_genrm import GenRMEnvironment
        from nemo_genrm.testing import cached_tiny_judge

        env = GenRMEnvironment.start({{
            "judge": {{"model_name": str(cached_tiny_judge("1")), "precision": "float32"}},
            "resources": {{"gpus_per_replica": {gpus}}},
        }})
    """,
    )
    assert_one_error(
        rc,
        out,
        "nemo_genrm.errors.ConfigError",
        f"the judge needs {gpus} GPUs",
        "lower num_replicas or gpus_per_replica",
    )


@pytest.mark.slow
def test_script_with_a_judge_path_that_does_not_exist(tmp_path, cluster_shell):
    rc, out = run_script(
        tmp_path,
        cluster_shell,
        f"""
        from nemo_genrm import GenRMEnvironment

        env = GenRMEnvironment.start({{
            "judge": {{"model_name": "{MISSING_JUDGE}", "precision": "float32"}},
            "resources": {{"gpus_per_replica": 0}},
        }})
    """,
    )
    assert_one_error(
        rc,
        out,
        "nemo_genrm.errors.ConfigError",
        f"judge.model_name: no tokenizer could be loaded from '{MISSING_JUDGE}'",
        "there is no such folder",
    )


@pytest.mark.slow
def test_script_that_creates_the_actor_itself_gets_the_error_typed_from_its_first_call(tmp_path, cluster_shell):
    """``GenRMEnvironment.remote`` (NeMo-RL's way) does not wait: a problem only the actor can
    see (here: the colocated group exists, so the driver lets it through, but the policy holds
    its whole GPU) is kept by the actor, and its first call raises it as the package's type,
    without an abort."""
    rc, out = run_script(
        tmp_path,
        cluster_shell,
        """
        import sys

        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        from nemo_genrm import GenRMEnvironment
        from nemo_genrm.errors import ConfigError
        from nemo_genrm.ray_env import ensure_ray
        from nemo_genrm.testing import cached_tiny_judge

        ensure_ray()  # joins the cluster as GenRMEnvironment would, uploading nothing
        group = placement_group([{"CPU": 1, "GPU": 1}], name="user_errors_policy")
        ray.get(group.ready())
        policy = ray.remote(num_cpus=0, num_gpus=1)(type("Policy", (), {"ping": lambda self: 1})).options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)).remote()
        ray.get(policy.ping.remote())  # the policy holds the bundle's whole GPU
        env = GenRMEnvironment.remote({
            "judge": {"model_name": str(cached_tiny_judge("1")), "precision": "float32"},
            "resources": {"placement": "colocated", "colocate_with": "user_errors_policy", "gpus_per_replica": 1},
        })
        try:
            ray.get(env.step.remote([[{"role": "assistant", "content": "42"}]], [{"ground_truth": "42"}]))
        except ConfigError:
            raise  # the package's type, through Ray's wrapper
        except BaseException:
            sys.exit(3)
    """,
    )
    assert rc == 1, f"not raised as a ConfigError (exit code {rc}):\n{out}"
    assert_one_error(rc, out, "ray.exceptions.RayTaskError(ConfigError)", "nemo_genrm.errors.ConfigError", "GPU free")


# --------------------------------------------------------------------------- entry points
def test_grpo_example_with_a_misspelt_override(shell):
    rc, out = run_as_user(["examples/run_grpo_genrm.py", "env.genrm.reward.kinds=probability"], shell)
    assert_one_error(rc, out, "error: 1 configuration problem", "env.genrm.reward.kinds", "did you mean 'kind'")


def test_reward_bench_example_with_a_judge_path_that_does_not_exist(tmp_path, shell):
    from nemo_genrm.evals.reward_bench.synthetic import main as write_synthetic

    data = write_synthetic([str(tmp_path / "data.jsonl")])
    rc, out = run_as_user(
        [
            "examples/run_reward_bench.py",
            "--config",
            "examples/configs/reward_bench_tiny.yaml",
            f"judge.model_name={MISSING_JUDGE}",
            f"data.path={data}",
            f"output_dir={tmp_path / 'out'}",
        ],
        shell,
    )
    assert_one_error(
        rc,
        out,
        "error: 1 configuration problem",
        f"judge.model_name: no tokenizer could be loaded from '{MISSING_JUDGE}'",
    )


def test_service_with_a_judge_path_that_does_not_exist(shell):
    rc, out = run_as_user(
        [
            "-m",
            "nemo_genrm.serve",
            "--config",
            "examples/configs/serve_judge_tiny.yaml",
            f"judge.model_name={MISSING_JUDGE}",
        ],
        shell,
    )
    assert_one_error(
        rc,
        out,
        "error: 1 configuration problem",
        f"judge.model_name: no tokenizer could be loaded from '{MISSING_JUDGE}'",
    )
    assert "Ray cluster" not in out  # checked before any replica (or cluster) starts


# ------------------------------------------------------------------ NeMo-RL's create_env
def run_in_nemo_rl_env(tmp_path: Path, env: dict[str, str], code: str) -> tuple[int, str]:
    """Run a NeMo-RL launcher script with this interpreter (the NeMo-RL suite's environment),
    NeMo-RL importable as it is here."""
    import nemo_rl

    env = {
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(nemo_rl.__file__).parents[1]), env.get("PYTHONPATH")])),
    }
    script = tmp_path / "launcher.py"
    script.write_text(textwrap.dedent(code))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return proc.returncode, "".join(
        line for line in proc.stdout.splitlines(keepends=True) if not NEMO_RL_NOISE.search(line)
    )


NEMO_RL_NOISE = re.compile(r"pynvml|\bINFO worker\.py:\d+ -- ")
"""Lines every NeMo-RL launcher prints, mistake or not, which do not count against the
screenful: the deprecated-``pynvml`` warning of NeMo-RL's torch (two lines per process, the
actor's too) and Ray's "connecting to the cluster" INFO lines."""


@pytest.mark.nemo_rl
def test_nemo_rl_create_env_with_a_misspelt_key_fails_in_the_driver(tmp_path, shell):
    """NeMo-RL's ``create_env`` calls ``options(...).remote(cfg)``: the config is checked there,
    before the actor (or a Ray cluster) starts."""
    rc, out = run_in_nemo_rl_env(
        tmp_path,
        shell,
        """
        from nemo_rl.environments.utils import create_env

        from nemo_genrm.integrations.nemo_rl import register

        register()
        env = create_env("genrm", {"judge": {"model_name": "Qwen/Qwen2.5-1.5B-Instruct"}, "num_workers": 3})
    """,
    )
    assert_one_error(rc, out, "nemo_genrm.errors.ConfigError", "env.genrm.num_workers: unknown key; valid keys:")
    assert "Ray cluster" not in out


@pytest.mark.nemo_rl
def test_nemo_rl_create_env_with_a_judge_path_that_does_not_exist_fails_in_the_driver(tmp_path, cluster_shell):
    """A judge folder that does not exist is seen by ``create_env`` itself, before any actor
    starts (not at the first ``step``): one ``ConfigError`` naming the setting."""
    rc, out = run_in_nemo_rl_env(
        tmp_path,
        cluster_shell,
        f"""
        import ray
        from nemo_rl.environments.utils import create_env

        from nemo_genrm.integrations.nemo_rl import register

        ray.init()  # NeMo-RL's init_ray joins the cluster as well
        register()
        env = create_env("genrm", {{
            "judge": {{"model_name": "{MISSING_JUDGE}", "precision": "float32"}},
            "resources": {{"gpus_per_replica": 0}},
        }})
    """,
    )
    assert_one_error(
        rc,
        out,
        "nemo_genrm.errors.ConfigError",
        f"judge.model_name: no tokenizer could be loaded from '{MISSING_JUDGE}': there is no such folder",
    )
