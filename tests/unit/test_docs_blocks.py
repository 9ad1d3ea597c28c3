"""Every code block of README.md and docs/*.md, checked without running it (fast).

What the blocks are and how a page marks one that is not run: ``tests/docs_blocks.py``. Here:
each block names its language; each marker is one the tests read (and a ``run by`` names a test
that exists and reads the page); shell blocks parse, put no comment after a ``\\`` continuation
(docs/guide.md's override example once failed with exit 127 for it), and the files, modules and
configs their commands name exist and load with the overrides shown; YAML blocks parse; Python
blocks compile. ``tests/functional/test_docs_run.py`` runs the blocks that are not marked.
"""

from __future__ import annotations

import ast
import re
import subprocess

import pytest
import yaml
from docs_blocks import (
    PENDING,
    PYTHON,
    ROOT,
    SHELL,
    Block,
    all_blocks,
    blocks,
    check_command,
    commands,
    continuation_comments,
    copy_checkout,
    pages,
    save_page_files,
)

from nemo_genrm.config import ConfigError
from nemo_genrm.grpo.config import load_grpo_config

BLOCKS = all_blocks()
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL]
YAML_BLOCKS = [b for b in BLOCKS if b.lang == "yaml"]
PYTHON_BLOCKS = [b for b in BLOCKS if b.lang in PYTHON]


def _ids(found: list[Block]) -> list[str]:
    return [b.id for b in found]


def _unless_pending(block: Block, problems: list[str]) -> None:
    """Fail on ``problems``; for a block of :data:`PENDING`, an expected failure that names them."""
    why = PENDING.get((block.page, block.first_line))
    if problems and why:
        pytest.xfail(f"{block.id} ({why}): " + "; ".join(problems))
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A scratch copy of the checkout, with every page's named YAML files saved in it."""
    dest = copy_checkout(tmp_path_factory.mktemp("checkout"))
    for page in pages():
        save_page_files(page, dest)
    return dest


def test_the_pages_are_found():
    assert {"README.md", "docs/guide.md", "docs/installation.md", "docs/environment.md"} <= set(pages())
    assert len(SHELL_BLOCKS) >= 10 and any(b.lang in PYTHON for b in BLOCKS)


@pytest.mark.parametrize("page", pages())
def test_every_block_names_its_language(page):
    untagged = [f"line {b.line}: {b.first_line[:60]}" for b in blocks(page) if not b.lang]
    assert not untagged, f"{page}: tag these blocks (bash, python, yaml, text, ...):\n" + "\n".join(untagged)


@pytest.mark.parametrize("page", pages())
def test_every_marker_is_one_the_tests_read(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    marked = {b.line for b in blocks(page) if b.marker}
    for match in re.finditer(r"<!--\s*docs-test:(.*?)-->", text):
        line = text[: match.start()].count("\n") + 1
        assert re.match(r"\s*(check \(.+\)|run by \S+)\s*$", match.group(1)), (
            f"{page}:{line}: write 'docs-test: check (why it is not run)' or 'docs-test: run by tests/...py::test'"
        )
        following = [n for n in marked if n > line]
        assert following and min(following) - line <= 2, f"{page}:{line}: a marker goes just above its block"
    for block in blocks(page):
        if block.marker == "run by":
            path, _, test = block.reason.partition("::")
            source = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).is_file() else ""
            assert f"def {test}(" in source, f"{block.id}: {block.reason} does not exist"
            assert block.page in source, f"{block.id}: {path} never reads {block.page}"


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids(SHELL_BLOCKS))
def test_shell_blocks_parse_and_continue_their_lines(block):
    problems = [
        f"a comment after a `\\` continuation ends the command there, and the next line runs alone: {line}"
        for line in continuation_comments(block.text)
    ]
    syntax = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, timeout=10)
    _unless_pending(block, problems + ([syntax.stderr] if syntax.returncode else []))


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids(SHELL_BLOCKS))
def test_shell_commands_name_what_exists_and_configs_that_load(block, checkout, monkeypatch):
    monkeypatch.chdir(checkout)  # the reader's shell is in the checkout's root
    _unless_pending(block, [p for argv in commands(block.text) for p in check_command(argv, checkout)])


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=_ids(YAML_BLOCKS))
def test_yaml_blocks_parse(block):
    try:
        yaml.safe_load(block.text)
    except yaml.YAMLError as exc:
        _unless_pending(block, [str(exc)])


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=_ids(PYTHON_BLOCKS))
def test_python_blocks_compile(block):
    try:
        ast.parse(block.text, filename=block.id)
    except SyntaxError as exc:
        _unless_pending(block, [str(exc)])


def test_the_guide_s_defaults_load_beside_the_checkout_and_say_where_they_were_looked_for(checkout, tmp_path):
    # docs/guide.md's my_run.yaml, saved in the checkout's root as the page says, loads with the
    # page's overrides (the check above); saved anywhere else, the error says where it looked.
    saved = next(b for b in blocks("docs/guide.md") if b.saved_as == "my_run.yaml")
    cfg = load_grpo_config(checkout / "my_run.yaml")
    assert cfg.env.genrm.judge.max_model_len == 8192 and cfg.policy.model_name  # merged over the 1B recipe
    (tmp_path / "my_run.yaml").write_text(saved.text)
    with pytest.raises(ConfigError) as err:
        load_grpo_config(tmp_path / "my_run.yaml")
    message = str(err.value)
    assert f"was looked for at {tmp_path / 'examples' / 'configs' / 'grpo_genrm_1B.yaml'}" in message
    assert f"relative to the folder of the file that names it ({tmp_path})" in message


def test_the_check_catches_what_broke_the_guide(checkout, monkeypatch):
    # The override example as it was: a comment after each continuation (exit 127 when pasted).
    broken = "uv run examples/run_grpo_genrm.py --config x.yaml \\\n    a.b=1 \\      # change a key\n    c.d=2\n"
    assert continuation_comments(broken) == ["a.b=1 \\      # change a key"]
    monkeypatch.chdir(checkout)
    problems = check_command(commands("uv run examples/run_grpo_genrm.py grpo.max_num_stepz=1")[0], checkout)
    assert problems and "did you mean 'max_num_steps'" in problems[0]
    assert check_command(["uv", "run", "pytest", "tests/unit/test_gone.py::test_x"], checkout) == [
        "pytest: no such test path tests/unit/test_gone.py"
    ]
