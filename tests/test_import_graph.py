"""The package's import graph: no cycles between modules, no function-level imports between mechanisms.

Read from the source with ``ast`` (nothing is imported), so the test sees every module, including
those whose optional dependencies are missing here.
"""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tfdpmech")


def _modules() -> dict[str, str]:
    found = {}
    for folder, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                found[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return found


MODULES = _modules()


def _resolve(module: str, node: ast.ImportFrom | ast.Import, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("tfdpmech")]
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    if not base.startswith("tfdpmech"):
        return []
    targets = []
    for alias in node.names:  # `from pkg import module` imports a module, `from module import name` a name
        candidate = f"{base}.{alias.name}"
        targets.append(candidate if candidate in MODULES else base)
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
