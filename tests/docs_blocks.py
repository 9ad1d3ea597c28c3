"""The code blocks of README.md and docs/*.md, and what the docs tests do with each.

A fenced block is found with its page, line, language and the marker above it. A marker is an
HTML comment (invisible on the rendered page) on the lines just before the fence:

- ``<!-- docs-test: check (why it is not run) -->``: the block is not run (it needs a GPU, the
  hub, a network, a cluster, runs for minutes or serves until stopped); its commands are still
  checked: shell syntax, no comment after a ``\\`` continuation, the files they name exist, and
  each entry point's config loads with the overrides shown. A Python block is compiled.
- ``<!-- docs-test: run by tests/<file>.py::<test> -->``: another test runs this block (that
  test must exist and read the page).

A block without a marker runs as pasted: shell blocks with ``bash -e`` in a scratch copy of the
checkout, the Python blocks of a page one after another in one interpreter (a reader runs them
as one session), each from that copy's root. A ``yaml`` block whose first line is a comment
naming a file (``# my_run.yaml``) is written there first, as a reader saves it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_MARKER = re.compile(r"<!--\s*docs-test:\s*(check|run by)\s*(.*?)\s*-->")
_FILE_HEADER = re.compile(r"^#\s*([\w./-]+\.ya?ml)\b")


# Blocks that would fail here or must not run as they stand, while their page is being edited:
# (page, first line) -> why. Their tests are expected failures and the run tests do not run them;
# an entry goes when its page marks or fixes the block. Empty: every block is marked or runs.
PENDING: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str  # relative to the checkout, e.g. "docs/guide.md"
    line: int  # line of the opening fence (1-based)
    lang: str
    text: str
    marker: str | None = None  # "check" or "run by"
    reason: str = ""  # the marker's text after its kind

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    @property
    def saved_as(self) -> str | None:
        """The file a YAML block is saved as (its first line ``# name.yaml``), if any."""
        match = _FILE_HEADER.match(self.text.splitlines()[0]) if self.lang == "yaml" and self.text else None
        return match.group(1) if match else None


def pages() -> list[str]:
    """README.md and every page under docs/, relative to the checkout."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def blocks(page: str) -> list[Block]:
    """The fenced blocks of ``page``, in order, with the marker just above each."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = opening.groups()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        marker = _marker_above(lines, i)
        kind, reason = (marker.group(1), marker.group(2)) if marker else (None, "")
        found.append(Block(page, i + 1, lang.lower(), "\n".join(body) + "\n", kind, reason))
        i = j + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def _marker_above(lines: list[str], fence: int) -> re.Match[str] | None:
    k = fence - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    return _MARKER.search(lines[k]) if k >= 0 else None


# ---------------------------------------------------------------------------- shell commands
def continuation_comments(text: str) -> list[str]:
    """Lines that put a comment after a ``\\`` continuation, or end a comment with one.

    ``cmd \\  # note`` escapes the space, ends the command at the comment, and runs the next line
    as a command of its own (exit 127); ``# note \\`` continues nothing either.
    """
    bad = []
    for line in text.splitlines():
        code = _code_part(line)
        if code != line and (code.rstrip().endswith("\\") or line.rstrip().endswith("\\")):
            bad.append(line.strip())
        elif re.search(r"\\[ \t]+$", line):  # a backslash then spaces: no continuation
            bad.append(line.strip())
    return bad


def _code_part(line: str) -> str:
    """``line`` up to its comment: the first ``#`` outside quotes that starts a word."""
    quote = None
    for pos, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (pos == 0 or line[pos - 1].isspace()):
            return line[:pos]
    return line


def commands(text: str) -> list[list[str]]:
    """The simple commands of a shell block, as argument lists (``$(...)`` kept whole in its word)."""
    joined = re.sub(r"\\\n", " ", text)
    out: list[list[str]] = []
    for line in joined.splitlines():
        held: list[str] = []
        lexer = shlex.shlex(_hold_substitutions(line, held), posix=True, punctuation_chars=";&|")
        lexer.whitespace_split, lexer.commenters = True, "#"
        current: list[str] = []
        for token in lexer:
            if token in {";", "&&", "||", "|", "&"}:
                if current:
                    out.append(current)
                current = []
            else:
                current.append(re.sub(r"@SUBST(\d+)@", lambda m, held=held: held[int(m.group(1))], token))
        if current:
            out.append(current)
    return out


def _hold_substitutions(line: str, held: list[str]) -> str:
    """``line`` with each ``$(...)`` (nested parentheses included) replaced by ``@SUBSTn@``."""
    out, i = [], 0
    while i < len(line):
        if line.startswith("$(", i):
            depth, j = 0, i + 1
            while j < len(line):
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                if depth == 0:
                    break
                j += 1
            held.append(line[i : j + 1])
            out.append(f"@SUBST{len(held) - 1}@")
            i = j + 1
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def without_substitutions(word: str) -> str:
    """``word`` with each ``$(...)`` replaced by a placeholder path (for checks that do not run it)."""
    held: list[str] = []
    return re.sub(r"@SUBST\d+@", _PLACEHOLDER, _hold_substitutions(word, held))


def program(argv: list[str]) -> tuple[str, list[str]]:
    """``(what runs, its arguments)`` with ``VAR=value`` prefixes and ``uv run [python]`` peeled off.

    What runs is a path (``examples/run_grpo_genrm.py``), ``-m <module>``, or the command's name.
    """
    args = list(argv)
    while args and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", args[0]):
        args.pop(0)
    if args[:2] == ["uv", "run"]:
        args = args[2:]
        while args and args[0].startswith("--"):  # uv's own options (--project DIR is not used)
            args.pop(0)
    if args and (args[0] == "python" or args[0].endswith("/python") or args[0] == "python3"):
        args = args[1:]
        if args[:1] == ["-m"]:
            return f"-m {args[1]}", args[2:]
    return (args[0], args[1:]) if args else ("", [])


# ------------------------------------------------------------------ checks of a command, not run
ENTRY_POINTS = ("examples/run_grpo_genrm.py", "examples/run_reward_bench.py")
_PLACEHOLDER = "/substituted/by/the/shell"  # what a `$(...)` stands for when the command is not run


def check_command(argv: list[str], cwd: Path) -> list[str]:
    """What is wrong with one command, without running it (empty when nothing is).

    The files and modules it names must exist; an entry point's config must load and validate
    with the overrides shown (through the entry point's own argument parser), the way it would
    before anything starts.
    """
    what, args = program(argv)
    args = [without_substitutions(a) for a in args]
    if what.startswith("-m "):
        return _check_module(what[3:], args, cwd)
    if what == "pytest":
        paths = [a.split("::")[0] for a in args if not a.startswith("-")]
        return [f"pytest: no such test path {p}" for p in paths if not (cwd / p).exists()]
    if what.endswith(".py"):
        if not (cwd / what).is_file():
            return [f"no such file {what}"]
        if what in ENTRY_POINTS:
            return _check_entry_point(what, args, cwd)
    return []


def _check_module(module: str, args: list[str], cwd: Path) -> list[str]:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        return [f"python -m {module}: no such module"]
    if module == "nemo_genrm.serve":
        from nemo_genrm.serve import load_service_config

        config, overrides, _ = _split_args(args, cwd)
        return _loads(lambda: load_service_config(config, overrides))
    return []


def _check_entry_point(script: str, args: list[str], cwd: Path) -> list[str]:
    from nemo_genrm.config import RewardBenchConfig, load_config, validate
    from nemo_genrm.grpo.config import load_grpo_config

    config, overrides, options = _split_args(args, cwd)
    if script == "examples/run_reward_bench.py":
        return _loads(lambda: validate(RewardBenchConfig, load_config(config, overrides, schema=RewardBenchConfig)))
    config = config or str(cwd / "examples" / "configs" / "grpo_genrm_tiny.yaml")  # the script's default
    if options.get("--engine") == "nemo_rl":  # NeMo-RL's own schema: the file must be there
        return [] if Path(config).is_file() else [f"--config {config}: no such file"]
    return _loads(lambda: load_grpo_config(config, overrides))


def _split_args(args: list[str], cwd: Path) -> tuple[str, list[str], dict[str, str]]:
    """``(--config as a path under cwd, the key=value overrides, the other --options)``."""
    options: dict[str, str] = {}
    overrides: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            options[name] = value or next(rest, "")
        else:
            overrides.append(arg)
    config = options.get("--config", "")
    if config and not Path(config).is_absolute():
        config = str(cwd / config)
    return config, overrides, options


def _loads(load) -> list[str]:
    from nemo_genrm.errors import ConfigError

    try:
        load()
    except ConfigError as exc:
        return [str(exc)]
    return []


# ----------------------------------------------------------------------- a scratch checkout
def copy_checkout(dest: Path) -> Path:
    """Copy what a fresh clone holds, with local edits (tracked and unignored files), to ``dest``."""
    import shutil
    import subprocess

    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the work tree is not copied
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def save_page_files(page: str, dest: Path) -> list[str]:
    """Write the page's YAML blocks that name a file (``# my_run.yaml``) into ``dest``, as a reader does."""
    saved = []
    for block in blocks(page):
        if block.saved_as:
            (dest / block.saved_as).parent.mkdir(parents=True, exist_ok=True)
            (dest / block.saved_as).write_text(block.text, encoding="utf-8")
            saved.append(block.saved_as)
    return saved
