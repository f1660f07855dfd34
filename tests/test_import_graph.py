"""The package's import graph: no two modules import each other, no cycles between modules, no function-level
imports between mechanisms.

Read from the source with ``ast`` (nothing is imported), so the test sees every module, including
those whose optional dependencies are missing here.

What counts as "module A imports module B" for the pairs (:func:`mutual_imports`): every ``import`` or
``from ... import`` statement anywhere in A's source that names B (relative imports resolved; ``from pkg import
name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``): at module level, inside
``if TYPE_CHECKING:`` and ``if __name__ == "__main__":`` blocks and ``try`` blocks, and inside functions and
methods. A lazy import inside a function, or an import only for type annotations, still makes the two modules
depend on each other; neither module is then readable or movable without the other, so a pair of modules that
import each other in any of these ways fails, named. The longer cycles (:func:`test_no_import_cycles_between_modules`)
are checked on module-level imports, a package's imports of its own submodules left out.
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tfdpmech")


def _modules(root: str = ROOT) -> dict[str, str]:
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(root))[:-3].replace(os.sep, ".")
                found[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return found


MODULES = _modules()


def _resolve(module: str, node: ast.ImportFrom | ast.Import, is_package: bool, modules: dict = MODULES) -> list[str]:
    package = next(iter(modules), "tfdpmech").split(".")[0]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == package]
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    if base.split(".")[0] != package:
        return []
    targets = []
    for alias in node.names:  # `from pkg import module` imports a module, `from module import name` a name
        candidate = f"{base}.{alias.name}"
        targets.append(candidate if candidate in modules else base)
    return targets


def _imports(module: str, path: str, *, top_level: bool) -> set[str]:
    tree = ast.parse(open(path, encoding="utf-8").read())
    is_package = path.endswith("__init__.py")
    nodes = tree.body if top_level else [n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef,
                                                                                     ast.AsyncFunctionDef))
                                        for n in ast.walk(f)]
    out = set()
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(t for t in _resolve(module, node, is_package) if t in MODULES and t != module)
    return out


def every_import(modules: dict[str, str]) -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` over every import statement anywhere in each module's source."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        edges: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(module, node, path.endswith("__init__.py"), modules):
                    if target in modules and target != module:
                        edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[module] = edges
    return graph


def mutual_imports(modules: dict[str, str]) -> list[str]:
    """One line per pair of modules that import each other (see the module docstring for what counts), with the
    line of each import."""
    graph = every_import(modules)
    return [f"{a} (line {graph[a][b]}) ↔ {b} (line {graph[b][a]})"
            for a in sorted(graph) for b in sorted(graph[a]) if a < b and a in graph.get(b, {})]


def test_no_two_modules_import_each_other():
    pairs = mutual_imports(MODULES)
    assert not pairs, ("modules that import each other (at module level, under TYPE_CHECKING or inside a function); "
                       "make the dependency one direction, or merge the two: " + "; ".join(pairs))


def _write(root, files: dict[str, str]) -> dict[str, str]:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return _modules(str(root / "pkg"))


@pytest.mark.parametrize("back", [
    "from ..a import f\n",                                                 # module level
    "def g():\n    from ..a import f\n    return f\n",                     # a lazy import in a function
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n",  # for annotations only
    "if __name__ == '__main__':\n    from pkg.a import f\n",               # a script block, absolute
    "class C:\n    def m(self):\n        from .. import a\n",             # a method, `from package import module`
])
def test_a_pair_of_modules_that_import_each_other_is_found_however_it_imports(tmp_path, back):
    modules = _write(tmp_path, {"__init__.py": "", "sub/__init__.py": "", "sub/b.py": back,
                                "a.py": "from .sub.b import g\n"})
    pairs = mutual_imports(modules)
    assert len(pairs) == 1 and pairs[0].startswith("pkg.a (line 1) ↔ pkg.sub.b (line "), pairs


def test_imports_in_one_direction_are_no_pair(tmp_path):
    modules = _write(tmp_path, {"__init__.py": "from . import a, b\n", "a.py": "from .b import g\n",
                                "b.py": "import os\n\ndef g():\n    import json\n    return json, os\n"})
    assert set(every_import(modules)["pkg.a"]) == {"pkg.b"}
    assert mutual_imports(modules) == []


def test_no_import_cycles_between_modules():
    graph = {m: _imports(m, p, top_level=True) for m, p in MODULES.items()}
    # a package importing its own submodules (re-exports) is not a cycle of concepts: drop package → child edges
    for m in graph:
        graph[m] = {t for t in graph[m] if not t.startswith(m + ".")}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles: " + "; ".join(" → ".join(c) for c in cycles)


def _mechanism(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "mechanisms" else None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _mechanism(m)))
def test_no_function_level_imports_between_mechanisms(module):
    mine = _mechanism(module)
    late = {t for t in _imports(module, MODULES[module], top_level=False) if _mechanism(t) not in (None, mine)}
    assert not late, f"{module} imports {sorted(late)} inside a function; import at module level"
