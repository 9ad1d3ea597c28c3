"""The package's layers: no import circle among modules or packages, and no package imports one above it.

The graph is read from the source with ``ast``: every import of a ``nemo_genrm`` module counts,
at module level or inside a function (a deferred import still ties the two modules together;
deferring it only hides the circle until the function runs). Imports under
``if TYPE_CHECKING:`` are left out, since they never run. Imports by name count too, where the
source shows them: in a module that calls an importer (``importlib.import_module``,
``__import__``, ``pkgutil.resolve_name``), every string naming a ``nemo_genrm`` module
(``"nemo_genrm.grpo.config"``, ``"nemo_genrm.grpo.config:GRPOMasterConfig"``, or a name inside it)
is an edge, whether passed straight to the importer or kept in a table it reads; a
``"module:attr"`` string is an edge anywhere, since it exists to be imported.

The layer map is :data:`LAYERS` (bottom first), and ``docs/design.md`` draws the same map; a
test keeps the two equal.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nemo_genrm

PACKAGE_DIR = Path(nemo_genrm.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree`` except those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


# Calls that import the module a string names; a string naming a module near one is an import.
IMPORTERS = frozenset({"import_module", "__import__", "resolve_name"})


def _calls_importer(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in IMPORTERS:
                return True
    return False


def _named_module(text: str, modules: set[str] | dict[str, Path]) -> str | None:
    """The nemo_genrm module a string names (``pkg.mod``, ``pkg.mod:attr``, ``pkg.mod.Name``), if any."""
    dotted = text.partition(":")[0]
    parts = dotted.split(".")
    if parts[0] != "nemo_genrm" or not all(p.isidentifier() for p in parts):
        return None
    for end in range(len(parts), 1, -1):  # the longest prefix that is a module
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _by_name(tree: ast.AST, modules: set[str] | dict[str, Path]) -> set[str]:
    """The nemo_genrm modules a module imports by name (see the module docstring)."""
    importer = _calls_importer(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (importer or ":" in node.value):
            target = _named_module(node.value, modules)
            if target:
                found.add(target)
    return found


def imports_in_source(
    name: str, source: str, modules: set[str] | dict[str, Path], *, is_package: bool = False, by_name: bool = True
) -> set[str]:
    """The nemo_genrm modules that module ``name`` (whose text is ``source``) imports.

    Args:
        name: The module's dotted name.
        source: Its source text.
        modules: Every module of the package (targets outside it are left out).
        is_package: Whether the source is a package's ``__init__.py`` (relative imports start there).
        by_name: Whether imports by name count (statements only when False).
    """
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(source)
    targets: set[str] = _by_name(tree, modules) if by_name else set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        targets.add(base)
        # `from package import module` imports that module too.
        targets.update(f"{base}.{alias.name}" for alias in node.names)
    return {t for t in targets if t in modules and t != name}


def import_graph(*, by_name: bool = True) -> dict[str, set[str]]:
    """Module -> the nemo_genrm modules it imports (by name too, unless ``by_name`` is False)."""
    modules = _modules()
    return {
        name: imports_in_source(
            name, path.read_text(encoding="utf-8"), modules, is_package=path.name == "__init__.py", by_name=by_name
        )
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules (first repeated last), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


# The modules at the root that every layer may import; they import nothing but one another.
ROOT_MODULES = ("errors", "dtypes", "ray_runtime", "ray_env", "orphan_guard", "console")

# Bottom first: (package, the packages it may import besides ROOT_MODULES). A package may import
# only packages listed before it, so no package imports one above it and no two packages import
# each other. ``environment`` is the public module path of the environment actor
# (``nemo_genrm.environment.GenRMEnvironment``, the class path NeMo-RL registers).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("files", ()),
    ("guard", ()),
    ("verifier", ("guard",)),
    ("verdicts", ("guard",)),
    ("prompts", ("guard", "verdicts")),
    ("tasks", ("prompts",)),
    ("config", ("guard", "verdicts", "prompts")),
    ("judges", ("guard", "verdicts", "prompts", "config")),
    ("testing", ("guard", "verdicts", "prompts", "config", "judges")),
    ("samples", ("guard", "verdicts", "prompts", "config", "judges")),
    ("modes", ("guard", "verifier", "verdicts", "prompts", "config", "judges", "samples")),
    ("watchdog", ("guard", "config", "testing", "samples")),
    ("env", ("guard", "verdicts", "prompts", "config", "judges", "samples", "modes", "watchdog")),
    ("environment", ("env",)),
    ("integrations", ("verdicts", "prompts", "config", "judges", "samples", "modes", "env")),
    ("serve", ("guard", "config", "judges", "samples")),
    ("evals", ("files", "guard", "verdicts", "prompts", "config", "judges")),
    ("grpo", ("files", "guard", "tasks", "config", "testing", "samples", "env", "integrations")),
    ("demo", ("files", "guard", "verdicts", "prompts", "tasks", "config", "testing", "evals", "grpo")),
    ("config_reference", ("config", "serve", "grpo")),
    ("docs", ("config_reference",)),
)

DESIGN_DOC = PACKAGE_DIR.parent / "docs" / "design.md"


def unit(module: str) -> str:
    """The layer a module belongs to: its top package under nemo_genrm, or its root module name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Layer -> the other layers its modules import (imports inside a layer are left out)."""
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        packages.setdefault(unit(module), set()).update(unit(t) for t in targets)
    return {name: targets - {name} for name, targets in packages.items()}


def layer_violations(
    packages: dict[str, set[str]],
    layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS,
    root: tuple[str, ...] = ROOT_MODULES,
) -> list[str]:
    """Every import the layer map forbids, one line each; empty when the packages follow it."""
    allowed = dict(layers)
    order = [name for name, _ in layers]
    problems = [
        f"{name} may import {below}, which is not below it in LAYERS"
        for i, (name, may) in enumerate(layers)
        for below in may
        if below not in order[:i]
    ]
    for name, targets in sorted(packages.items()):
        if name == "nemo_genrm":
            # The package's own __init__ is the facade above every layer: it imports by name, on
            # first access only (that nothing is imported at import time is tested apart).
            continue
        elif name in root:
            problems += [f"root module {name} imports {t}" for t in sorted(targets - set(root))]
        elif name not in allowed:
            problems.append(f"{name} is in no layer: add it to LAYERS and to docs/design.md's layer map")
        else:
            extra = targets - set(root) - set(allowed[name])
            problems += [f"{name} imports {t}, which the layer map does not allow" for t in sorted(extra)]
    return problems


def documented_layers(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The layer map drawn in design.md's "Layers" table, bottom first, as :data:`LAYERS` spells it."""
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, tuple[str, ...]]] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`(\w+)(?:/|\.py)`", cells[0])
        if len(names) == 1 and names[0] not in ROOT_MODULES:
            rows.append((names[0], tuple(re.findall(r"`(\w+)/`", cells[2]))))
    return tuple(reversed(rows))  # the table is drawn top floor first


def test_no_import_cycle_among_nemo_genrm_modules() -> None:
    graph = import_graph()
    assert len(graph) > 40  # the walk found the package
    assert "nemo_genrm.config.loading" in graph["nemo_genrm.config"]  # and reads imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_among_packages() -> None:
    packages = package_graph(import_graph())
    assert {"env", "modes", "samples", "grpo", "demo", "serve", "guard", "tasks", "config_reference"} <= set(packages)
    cycle = find_cycle(packages)
    assert cycle is None, "package import cycle: " + " -> ".join(cycle or [])


def test_no_package_imports_a_package_above_it() -> None:
    problems = layer_violations(package_graph(import_graph()))
    assert not problems, "layer map broken:\n" + "\n".join(problems)


def test_design_doc_draws_the_tested_layer_map() -> None:
    text = DESIGN_DOC.read_text(encoding="utf-8")
    drawn = documented_layers(text)
    assert [name for name, _ in drawn] == [name for name, _ in LAYERS], "docs/design.md orders the layers otherwise"
    assert {name: set(may) for name, may in drawn} == {name: set(may) for name, may in LAYERS}, (
        "docs/design.md's layer table allows other imports than LAYERS"
    )
    for name in ROOT_MODULES:
        assert f"`{name}.py`" in text.split("## Layers", 1)[1].split("\n## ", 1)[0]


def test_the_walk_sees_deferred_imports_and_cycles() -> None:
    # serve.service imports serve.app inside a function: that edge counts.
    assert "nemo_genrm.serve.app" in import_graph()["nemo_genrm.serve.service"]
    circle = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(circle) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_import_nemo_genrm_imports_no_module_at_import_time() -> None:
    # `import nemo_genrm` stays light: its __init__ names the environment and imports it on first access.
    assert import_graph(by_name=False)["nemo_genrm"] == set()
    assert import_graph()["nemo_genrm"] == {"nemo_genrm.env.environment"}  # the lazy name is an edge


# What config/docs.py once held: the driver's and the service's schemas named in a table that
# importlib read, so config depended on the two packages above it with no import statement.
HIDDEN_IMPORTS = """
import importlib
SECTIONS = [("grpo", "nemo_genrm.grpo.config:GRPOMasterConfig"), ("serve", "nemo_genrm.serve.config:ServiceConfig")]
def load(target):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
"""


def test_the_walk_sees_imports_by_name() -> None:
    graph = import_graph()
    docs = "nemo_genrm.config.docs"
    assert imports_in_source(docs, HIDDEN_IMPORTS, graph) == {"nemo_genrm.grpo.config", "nemo_genrm.serve.config"}
    assert imports_in_source(docs, HIDDEN_IMPORTS, graph, by_name=False) == set()
    # A literal handed to the importer, and a name inside a module, in a module that imports by name.
    literal = 'import importlib\nimportlib.import_module("nemo_genrm.serve.config")\nX = "nemo_genrm.grpo.config.GRPOMasterConfig"'
    assert imports_in_source(docs, literal, graph) == {"nemo_genrm.serve.config", "nemo_genrm.grpo.config"}
    # Without an importer, a dotted string is text (a logger name, a class path handed to another
    # registry); a "module:attr" string is an import anywhere.
    assert imports_in_source(docs, 'NAME = "nemo_genrm.grpo.config"', graph) == set()
    assert imports_in_source(docs, 'ENTRY = "nemo_genrm.grpo.config:GRPOMasterConfig"', graph) == {
        "nemo_genrm.grpo.config"
    }
    # Put back into the real graph, the table is the cycle config -> grpo -> config, and a layer break.
    graph[docs] = graph[docs] | imports_in_source(docs, HIDDEN_IMPORTS, graph)
    packages = package_graph(graph)
    cycle = find_cycle(packages)
    assert cycle is not None and {"config", "grpo"} <= set(cycle)
    assert "config imports grpo, which the layer map does not allow" in layer_violations(packages)


def test_the_layer_check_finds_upward_imports_and_package_cycles() -> None:
    # Modules of two packages importing each other, without any module-level circle.
    modules = {
        "nemo_genrm.low.a": {"nemo_genrm.high.b"},
        "nemo_genrm.high.b": set(),
        "nemo_genrm.high.c": {"nemo_genrm.low.d"},
        "nemo_genrm.low.d": set(),
    }
    assert find_cycle(modules) is None
    packages = package_graph(modules)
    assert packages == {"low": {"high"}, "high": {"low"}}
    assert find_cycle(packages) == ["high", "low", "high"]
    layers = (("low", ()), ("high", ("low",)))
    assert layer_violations(packages, layers, ("errors",)) == ["low imports high, which the layer map does not allow"]
    # A package missing from the map, a root module importing a package, an allowance from above.
    assert layer_violations({"new": set(), "errors": {"low"}}, layers, ("errors",)) == [
        "root module errors imports low",
        "new is in no layer: add it to LAYERS and to docs/design.md's layer map",
    ]
    assert layer_violations({}, (("low", ("high",)), ("high", ())), ()) == [
        "low may import high, which is not below it in LAYERS"
    ]
