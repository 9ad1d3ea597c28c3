"""The README's "use the environment from your own code" snippet runs verbatim as a user script.

Its judge judges: the demo's learned tiny judge gives the right answer 1.0 and the wrong one 0.0
(the snippet once used a judge that always said "1" beside a comment promising exactly that).
It is written to a file in a folder of its own and run from there with ``uv run --project
<checkout> python script.py``, as a user runs it from an experiment folder, with no ``RAY_*``
variable of the test session's: Ray's ``uv run`` hook is then active, as in a user's own shell,
the package's actors must still start, and nothing is packed or uploaded (Ray would print a
packaging line per file).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADING = "Use the environment from your own code"


def readme_snippet() -> str:
    """The first ``python`` code block after the usage sentence of README.md."""
    text = (ROOT / "README.md").read_text()
    start = text.index(HEADING)
    match = re.search(r"```python\n(.*?)```", text[start:], flags=re.DOTALL)
    assert match, "no python block after the usage sentence"
    return match.group(1)


def test_snippet_is_complete_python():
    code = readme_snippet()
    ast.parse(code)
    assert "RAY_" not in code and "os.environ" not in code


@pytest.fixture(scope="module")
def demo_judge(tiny_cache_dir: str) -> None:
    """Train the demo judge here (once, cached), so the script's time limit covers the script."""
    from nemo_genrm.demo.models import cached_demo_judge

    cached_demo_judge(cache_dir=tiny_cache_dir)


@pytest.mark.slow
@pytest.mark.demo_models
def test_readme_snippet_runs_as_a_user_script(tmp_path, tiny_cache_dir, demo_judge):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    script = tmp_path / "script.py"
    script.write_text(readme_snippet())
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a user's shell sets none
    # ... except that the snippet's ray.init() must start a cluster of its own here, not join
    # one that another job on this machine started with `ray start`.
    env["RAY_ADDRESS"] = "local"
    env["NEMO_GENRM_CACHE"] = tiny_cache_dir  # the demo judge is trained once per test session
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(
        [uv, "run", "--project", str(ROOT), "python", str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    for packaging in ("Pushing file package", "Creating a file package", "Ignoring upload"):
        assert packaging not in proc.stderr, proc.stderr[-6000:]
    rewards = re.search(r"rewards: \[(.*)\]", proc.stdout)
    assert rewards, proc.stdout
    # 3 + 5: "The answer is 8." agrees with the reference 8, "The answer is 7." does not (under every fence nonce:
    # tests/functional/demo/test_demo.py::test_the_readme_answers_are_judged_alike_under_every_fence_nonce).
    assert [float(x) for x in rewards.group(1).split(",")] == [1.0, 0.0], proc.stdout + proc.stderr[-6000:]
    assert "'genrm/count/judged': 2.0" in proc.stdout and "genrm/mean_reward" in proc.stdout
