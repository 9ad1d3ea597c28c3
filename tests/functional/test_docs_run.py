"""Every code block of README.md and docs/*.md that is not marked runs as pasted, from a fresh copy.

The checkout's files (tracked and unignored, local edits included) are copied to a scratch
folder, as a fresh clone would hold them; a page's named YAML files are saved in it as its reader
saves them. Each shell block runs there with ``bash -e``, so ``uv run`` builds that copy's own
environment on first use exactly as a new user's shell does; a page's Python blocks run one
after another in one interpreter (a reader's session). The shell has none of the test session's
``RAY_*`` variables (a user's shell sets none); the tiny models come from the session's cache.
What the blocks are, how a page marks one that is not run, and the checks every block gets
without running: ``tests/docs_blocks.py`` and ``tests/unit/test_docs_blocks.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from docs_blocks import PENDING, PYTHON, SHELL, Block, all_blocks, copy_checkout, pages, save_page_files

BLOCKS = [b for b in all_blocks() if b.marker is None]
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL]
PYTHON_PAGES = sorted({b.page for b in BLOCKS if b.lang in PYTHON})
# A page whose blocks use the demo models waits for their background build: it runs with the
# tests that need them, last (tests/conftest.py), not idle on the build's lock meanwhile.
_DEMO_MODELS = ("cached_demo_", "tiny://demo")


def _page_param(page: str) -> object:
    texts = [b.text for b in BLOCKS if b.page == page and b.lang in PYTHON]
    needs = any(name in text for text in texts for name in _DEMO_MODELS)
    return pytest.param(page, marks=[pytest.mark.demo_models] if needs else [], id=page)


TIMEOUT_S = 600

# Runs a page's Python blocks in order in one namespace, naming the block that fails.
RUNNER = textwrap.dedent(
    """
    import json, sys
    namespace = {"__name__": "__main__"}
    for block in json.load(open(sys.argv[1])):
        print(f"--- running {block['id']}", flush=True)
        exec(compile(block["text"], block["id"], "exec"), namespace)
    """
)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    dest = copy_checkout(tmp_path_factory.mktemp("fresh") / "nemo-genrm")
    for page in pages():
        save_page_files(page, dest)
    return dest


@pytest.fixture(scope="module")
def user_env(tiny_cache_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "VIRTUAL_ENV"}
    env["NEMO_GENRM_CACHE"] = tiny_cache_dir
    return env


def _run(args: list[str], cwd, env, what: str) -> str:
    """Run in a session of its own; on a timeout kill everything it started."""
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out = proc.communicate(timeout=TIMEOUT_S)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out = proc.communicate()[0]
        pytest.fail(f"{what} ran past {TIMEOUT_S}s:\n{out[-6000:]}")
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{out[-6000:]}"
    return out


def _pending(block: Block) -> None:
    why = PENDING.get((block.page, block.first_line))
    if why:
        pytest.xfail(f"{block.id} is not run: {why}")


@pytest.mark.slow
@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=[b.id for b in SHELL_BLOCKS])
def test_shell_block_runs_as_pasted(block, checkout, user_env):
    _pending(block)
    _run(["bash", "-e", "-o", "pipefail", "-c", block.text], checkout, user_env, f"{block.id} (bash)")


@pytest.mark.slow
@pytest.mark.parametrize("page", [_page_param(page) for page in PYTHON_PAGES])
def test_python_blocks_of_a_page_run_in_one_session(page, checkout, user_env, tmp_path):
    found = [b for b in BLOCKS if b.page == page and b.lang in PYTHON]
    for block in found:
        _pending(block)
    (tmp_path / "blocks.json").write_text(json.dumps([{"id": b.id, "text": b.text} for b in found]))
    (tmp_path / "run_blocks.py").write_text(RUNNER)
    uv = "uv" if subprocess.run(["which", "uv"], capture_output=True).returncode == 0 else None
    command = [uv, "run", "python"] if uv else [sys.executable]
    _run([*command, str(tmp_path / "run_blocks.py"), str(tmp_path / "blocks.json")], checkout, user_env, page)
