"""scheduling/'s modules have one job each and import one another one way (#15 item 4).

Read from the source, function-level imports included: a deferred import hides a cycle from the
interpreter, not from a reader.
"""

import ast

from tests.conftest import ROOT

APP = ROOT / "scheduling"
MAX_LINES = 450


def _modules() -> dict[str, ast.Module]:
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): ast.parse(
            path.read_text()
        )
        for path in APP.rglob("*.py")
        if "migrations" not in path.parts
    }


def _imports_within_the_app(tree: ast.Module, modules: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scheduling"):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("scheduling")}
    return found & modules - {"scheduling"}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        for imported in sorted(graph[module]):
            if imported in path:
                return [*path[path.index(imported) :], imported]
            if imported not in done and (cycle := visit(imported, [*path, imported])):
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done and (cycle := visit(module, [module])):
            return cycle
    return None


def test_the_scheduling_modules_import_one_another_one_way():
    modules = _modules()
    graph = {name: _imports_within_the_app(tree, set(modules)) - {name} for name, tree in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_scheduling_module_is_longer_than_450_lines():
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in APP.rglob("*.py")
        if "migrations" not in path.parts
    }
    assert {path: length for path, length in lengths.items() if length > MAX_LINES} == {}
