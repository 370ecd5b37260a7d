"""The package's layout, read from its source with ``ast``: what a newcomer can rely on.

- No import cycle among cronlease modules, counting imports under
  ``if TYPE_CHECKING:`` and inside functions (a cycle that only type checking
  or a late import hides is still two modules that cannot be read apart), and
  no module importing the face (``__init__``) of a package it lives in.
- No module uses another module's underscore names (``from m import _x``,
  ``m._x``): a name shared between modules gets a public name in its module,
  which stays private by living in an underscore module.
- The layers of docs/design.md §9 hold: ``lint-imports`` (import-linter) keeps
  pyproject.toml's ``[tool.importlinter]`` contracts, which say which layer may
  import which. The checks here are the ones a layer contract does not make:
  cycles between modules of one layer, and names shared across modules.

A module is as long as its one idea: there is no cap on its lines.

Each check is a function of a source tree, tried first on small made-up trees,
so a check that finds nothing has been seen to find something.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "cronlease"


@dataclass(frozen=True)
class Module:
    name: str
    path: Path  # relative to the root, for messages
    is_package: bool
    source: str
    tree: ast.Module


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int


def read_modules(root: Path, package: str) -> dict[str, Module]:
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        source = path.read_text(encoding="utf-8")
        name = ".".join(parts)
        tree = ast.parse(source, filename=str(path))
        modules[name] = Module(name, path.relative_to(root), is_package, source, tree)
    return modules


def imported_from(module: Module, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_edges(modules: dict[str, Module]) -> list[Edge]:
    """Every import of one cronlease module by another, wherever in the file it is."""
    edges = []
    for module in modules.values():
        for node in ast.walk(module.tree):  # walk: TYPE_CHECKING blocks and functions too
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        edges.append(Edge(module.name, alias.name, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                origin = imported_from(module, node)
                if origin not in modules:
                    continue
                submodules = [f"{origin}.{a.name}" for a in node.names]
                # ``from pkg import submodule`` reads nothing from pkg's face: no edge to it
                if not all(name in modules for name in submodules):
                    edges.append(Edge(module.name, origin, node.lineno))
                edges.extend(
                    Edge(module.name, name, node.lineno) for name in submodules if name in modules
                )
    return [edge for edge in edges if edge.source != edge.target]


def cycles(modules: dict[str, Module]) -> list[str]:
    """One message per strongly connected group of modules, showing one cycle through it."""
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for edge in import_edges(modules):
        graph[edge.source].setdefault(edge.target, edge.line)
    found = []
    for group in strongly_connected(graph):
        if len(group) < 2:
            continue
        start = min(group)
        path = cycle_through(graph, start, group)
        steps = [f"{where(modules[a], graph[a][b])} imports {b}" for a, b in pairwise(path)]
        found.append("import cycle: " + "; ".join(steps))
    return found


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph is small, but recursion limits are not)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    groups.append(group)
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return groups


def cycle_through(graph: dict[str, dict[str, int]], start: str, group: set[str]) -> list[str]:
    """A shortest path start -> ... -> start inside ``group`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target not in group:
                    continue
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a group of two or more has one


def face_imports(modules: dict[str, Module]) -> list[str]:
    """Imports of the ``__init__`` of a package the importing module is inside of.

    Python runs a package's ``__init__`` before any module in it, and the face
    imports its insides to re-export them: an inside that imports its face is a
    cycle that only holds while the face does not re-export that inside.
    """
    found = []
    for edge in import_edges(modules):
        if modules[edge.target].is_package and edge.source.startswith(edge.target + "."):
            found.append(
                f"{where(modules[edge.source], edge.line)} imports the face of its own package "
                f"{edge.target}; import the module that defines the name"
            )
    return sorted(found, key=by_place)


def where(module: Module, line: int) -> str:
    return f"{module.path.as_posix()}:{line}"


def by_place(message: str) -> tuple[str, int]:
    path, line = message.split(" ", 1)[0].rsplit(":", 1)
    return path, int(line)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_name_uses(modules: dict[str, Module]) -> list[str]:
    """``from m import _x`` and ``m._x`` where ``m`` is another cronlease module.

    Underscore *modules* are not names of a module: importing them is how the
    private layout is meant to be used.
    """
    found = []
    for module in modules.values():
        bound: dict[str, str] = {}  # local name -> the cronlease module it is bound to
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        local = alias.asname or alias.name.split(".")[0]
                        bound[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom):
                origin = imported_from(module, node)
                if origin not in modules or origin == module.name:
                    continue
                for alias in node.names:
                    if f"{origin}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
                    elif is_private(alias.name):
                        line = getattr(alias, "lineno", node.lineno)  # alias has it from 3.10
                        found.append(f"{where(module, line)} imports {alias.name} from {origin}")
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Attribute) or not is_private(node.attr):
                continue
            owner = dotted(node.value, bound)
            submodule = f"{owner}.{node.attr}" in modules
            if owner in modules and owner != module.name and not submodule:
                found.append(f"{where(module, node.lineno)} uses {owner}.{node.attr}")
    return sorted(found, key=by_place)


def dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The module an attribute chain such as ``cronlease._lease.model`` names, if any."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = dotted(node.value, bound)
        return None if owner is None else f"{owner}.{node.attr}"
    return None


# --- the checks, tried on made-up packages ------------------------------------------------


def make_package(root: Path, files: dict[str, str]) -> dict[str, Module]:
    for relative, text in files.items():
        path = root / "pkg" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return read_modules(root, "pkg")


def test_cycles_are_found_through_type_checking_and_function_local_imports(
    tmp_path: Path,
) -> None:
    modules = make_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.b import B\n",
            "b.py": """\
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from pkg.c import C
            """,
            "c.py": "def f():\n    from . import a\n",
            "d.py": "import pkg.a\n",
        },
    )
    [message] = cycles(modules)
    assert message == (
        "import cycle: pkg/a.py:1 imports pkg.b; pkg/b.py:3 imports pkg.c; pkg/c.py:2 imports pkg.a"
    )


def test_a_module_importing_its_own_packages_face_is_found(tmp_path: Path) -> None:
    modules = make_package(
        tmp_path,
        {
            "__init__.py": "from pkg.sub.inner import X\n",
            "sub/__init__.py": "",
            "sub/inner.py": "from pkg import VERSION\nfrom pkg.other import Y\n",
            "other.py": "from pkg.sub import inner\n",  # a sibling package's face is fine
        },
    )
    assert face_imports(modules) == [
        "pkg/sub/inner.py:1 imports the face of its own package pkg; "
        "import the module that defines the name"
    ]
    assert "import cycle" in cycles(modules)[0]  # and there the face re-exports it: a cycle


def test_private_names_of_other_modules_are_found(tmp_path: Path) -> None:
    modules = make_package(
        tmp_path,
        {
            "__init__.py": "",
            "_inner.py": "def _helper(): ...\ndef __getattr__(name): ...\n",
            "user.py": """\
                from pkg._inner import _helper, __getattr__
                from pkg import _inner
                import pkg._inner
                import pkg._inner as inner
                _inner._helper()
                pkg._inner._helper()
                inner._helper()
                inner.__dict__
                def f(self):
                    return self._private
            """,
        },
    )
    assert private_name_uses(modules) == [
        "pkg/user.py:1 imports _helper from pkg._inner",
        "pkg/user.py:5 uses pkg._inner._helper",
        "pkg/user.py:6 uses pkg._inner._helper",
        "pkg/user.py:7 uses pkg._inner._helper",
    ]


# --- the checks, on cronlease ------------------------------------------------------------


@pytest.fixture(scope="module")
def cronlease_modules() -> dict[str, Module]:
    modules = read_modules(ROOT, PACKAGE)
    # the graph is read at all: the face imports the scheduler
    assert any(e.target == "cronlease._scheduler" for e in import_edges(modules))
    return modules


@pytest.mark.parametrize("check", [cycles, face_imports, private_name_uses])
def test_cronlease_layout(
    check: Callable[[dict[str, Module]], list[str]], cronlease_modules: dict[str, Module]
) -> None:
    found = check(cronlease_modules)
    assert not found, "\n".join(found)


def lint_imports() -> subprocess.CompletedProcess[str]:
    """``lint-imports`` as CI runs it, on this tree (the venv's, whichever is running)."""
    command = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(command), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def test_the_layer_contracts_are_kept() -> None:
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
    assert "KEPT" in result.stdout  # the contracts were read: none is skipped silently


# --- the tick path, as data ------------------------------------------------------------

#: the stages of a tick in the order a reader follows one (docs/design.md §4): a stage may
#: import only stages before it, so each module is entered once, in one direction
TICK_PATH = [
    "cronlease._run.timer.ticks",
    "cronlease._run.acquisition.staging",
    "cronlease._run.acquisition.slot_check",
    "cronlease._run.acquisition.admission",
    "cronlease._run.acquisition.leases",
    "cronlease._run.workers.pool",
    "cronlease._run.workers.active",
    "cronlease._run.workers.execution",
    "cronlease._run.recording.recorder",
    "cronlease._run.runner",
    "cronlease._run.acquisition.acquirer",
    "cronlease._run.timer.fire",
]


def backward_imports(modules: dict[str, Module], path: list[str]) -> list[str]:
    """Imports of a later stage by an earlier one (or of a stage by the lower layers)."""
    order = {name: index for index, name in enumerate(path)}
    found = []
    for edge in import_edges(modules):
        if edge.target not in order:
            continue
        source = order.get(edge.source)
        if source is None and edge.source.startswith(("cronlease._lease", "cronlease._timing")):
            source = -1  # the lease and timing layers know nothing of the tick path
        if source is not None and source < order[edge.target]:
            found.append(
                f"{where(modules[edge.source], edge.line)} imports {edge.target}, "
                "a later stage of the tick path"
            )
    return found


def test_a_stage_importing_a_later_one_is_found(tmp_path: Path) -> None:
    modules = make_package(
        tmp_path,
        {
            "__init__.py": "",
            "first.py": "from pkg import second\n",
            "second.py": "",
        },
    )
    assert backward_imports(modules, ["pkg.first", "pkg.second"]) == [
        "pkg/first.py:1 imports pkg.second, a later stage of the tick path"
    ]
    assert backward_imports(modules, ["pkg.second", "pkg.first"]) == []


def test_the_tick_path_crosses_each_module_once_in_one_direction(
    cronlease_modules: dict[str, Module],
) -> None:
    assert all(name in cronlease_modules for name in TICK_PATH), "a stage was renamed"
    found = backward_imports(cronlease_modules, TICK_PATH)
    assert not found, "\n".join(found)
