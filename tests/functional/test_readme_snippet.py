"""The README's "use the environment from your own code" snippet runs verbatim as a user script.

It is written to a file and run with ``uv run python script.py`` from the project, with every
``RAY_*`` variable removed from the environment: Ray's ``uv run`` hook is then active, as in a
user's own shell, and the package's actors must still start.
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


@pytest.mark.slow
def test_readme_snippet_runs_as_a_user_script(tmp_path, tiny_cache_dir):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    script = tmp_path / "script.py"
    script.write_text(readme_snippet())
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a user's shell sets none
    env["NEMO_GENRM_CACHE"] = tiny_cache_dir  # the tiny judge is built once per test session
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(
        [uv, "run", "--project", str(ROOT), "python", str(script)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    rewards = re.search(r"rewards: \[(.*)\]", proc.stdout)
    assert rewards, proc.stdout
    assert [float(x) for x in rewards.group(1).split(",")] == [1.0, 1.0]  # the tiny judge always agrees
    assert "'genrm/count/judged': 2.0" in proc.stdout and "genrm/mean_reward" in proc.stdout
