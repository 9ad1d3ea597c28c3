"""The tests mirror the package: ``tests/{unit,functional}/<package>/`` holds the tests of
``nemo_genrm/<package>/``; the top level of each keeps the tests of the root modules and the
checks that span the project (layers, docs, public paths, shipped configs)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import nemo_genrm

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = Path(nemo_genrm.__file__).parent
SUITES = ("unit", "functional")


def _folders(suite: str) -> list[Path]:
    return [p for p in (TESTS / suite).iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_every_test_folder_is_named_after_a_package_of_nemo_genrm():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    strays = [f"tests/{suite}/{f.name}" for suite in SUITES for f in _folders(suite) if f.name not in packages]
    assert not strays, f"test folders with no package of that name in nemo_genrm/: {strays}"


def test_test_files_have_unique_names():
    # pytest imports test modules by their file name (no __init__.py in tests/): a name used twice
    # would shadow the other.
    names = Counter(p.name for suite in SUITES for p in (TESTS / suite).rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []


def test_the_top_level_holds_root_modules_and_project_wide_checks_only():
    root_modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    project_wide = {
        "import_graph",
        "docs_blocks",
        "doctests",
        "public_paths",
        "shipped_configs",
        "layout",
        "docs_run",
        "readme_snippet",
        "user_errors",
    }
    top = {p.stem.removeprefix("test_") for suite in SUITES for p in (TESTS / suite).glob("test_*.py")}
    assert top - root_modules - project_wide == set()
