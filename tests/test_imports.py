"""The import graph of `planner/` and `solvers/`, read from the source (ast, nothing imported):
no module may import itself through others (a circle), `solvers` (numeric engines on plain
data) never imports `planner` (the domain), and the adapters (the CLI, the client, the exporters,
the HTML report, the gRPC server) reach the domain only through `planner.api` and the schema
(planner/schema/): none imports the planner, the latency model or the simulator.

Every import counts, module-level or inside a function, `TYPE_CHECKING` blocks excepted (they do
not run): a function-level import that closes a circle is a circle the next refactor trips on.
`from package import name` counts as importing `package.name` when that is a module, else the
package itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("planner", "solvers")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            out[_module_name(path)] = path
    return out


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of ours that `name` imports (when it runs)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def resolve(target: str) -> str | None:
        # The module itself, or the closest enclosing package of ours.
        while target:
            if target in modules:
                return target
            target = target.rpartition(".")[0]
        return None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for stmt in node.orelse:
                visit(stmt)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                hit = resolve(alias.name)
                if hit:
                    found.add(hit)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name if is_pkg else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                src = f"{base}.{node.module}" if node.module else base
            else:
                src = node.module or ""
            for alias in node.names:
                hit = resolve(f"{src}.{alias.name}") if f"{src}.{alias.name}" in modules else resolve(src)
                if hit:
                    found.add(hit)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _path_within(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete circle inside a component, for the failure message."""
    members = set(comp)
    start = comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    back = [node]
                    while back[-1] != start:
                        back.append(prev[back[-1]])
                    return [*reversed(back), start]
                if child not in prev:
                    prev[child] = node
                    nxt.append(child)
        frontier = nxt
    return comp


def test_no_import_circles() -> None:
    graph = _graph()
    cycles = _cycles(graph)
    described = [" -> ".join(_path_within(graph, c)) + f"  (component: {', '.join(c)})" for c in cycles]
    assert not cycles, "import circles:\n" + "\n".join(described)


def test_solvers_never_import_planner() -> None:
    graph = _graph()
    bad = {m: sorted(d for d in deps if d.split(".")[0] == "planner") for m, deps in graph.items()}
    bad = {m: deps for m, deps in bad.items() if m.startswith("solvers") and deps}
    assert not bad, f"solvers import planner: {bad}"


# The adapters: they parse, call planner.api, render. Modules by prefix.
ADAPTERS = (
    "planner.cli",
    "planner.client",
    "planner.commands",
    "planner.export",
    "planner.export_route",
    "planner.htmlreport",
    "planner.server",
)
# What lies behind the API: an adapter that imports one of these depends on how a figure is
# computed, not on what the API answers (issue 34).
BEHIND_THE_API = ("planner.plan", "planner.latency", "planner.simulate")


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _adapters_behind_the_api(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    bad = {m: sorted(d for d in deps if _under(d, BEHIND_THE_API)) for m, deps in graph.items()}
    return {m: deps for m, deps in bad.items() if _under(m, ADAPTERS) and deps}


def test_adapters_see_only_the_api_layer() -> None:
    bad = _adapters_behind_the_api(_graph())
    assert not bad, f"adapters import past planner.api and planner.schema: {bad}"


def _reach(graph: dict[str, set[str]], start: str) -> dict[str, str | None]:
    """Every module `start` imports, directly or through others, each with the module that
    brings it in (None for `start`): the chain back is the failure's explanation."""
    seen: dict[str, str | None] = {start: None}
    stack = [start]
    while stack:
        node = stack.pop()
        for dep in sorted(graph.get(node, ())):
            if dep not in seen:
                seen[dep] = node
                stack.append(dep)
    return seen


def _schema_behind_the_api(graph: dict[str, set[str]]) -> list[str]:
    """Chains from a schema module to a module behind the API, e.g. `planner.latency.model <-
    planner.schema.reports`. The schema is what the adapters import, so a latency import there
    is one in every adapter."""
    out = []
    for root in sorted(m for m in graph if _under(m, ("planner.schema",))):
        seen = _reach(graph, root)
        for m in sorted(seen):
            if _under(m, BEHIND_THE_API):
                chain = [m]
                while (up := seen[chain[-1]]) is not None:
                    chain.append(up)
                out.append(" <- ".join(chain))
    return out


def test_schema_imports_nothing_behind_the_api() -> None:
    """Transitively: planner.schema (and so every adapter through it) imports no planner.plan,
    planner.latency or planner.simulate module (issue 34)."""
    bad = _schema_behind_the_api(_graph())
    assert not bad, "planner.schema reaches past the API:\n" + "\n".join(bad)


def test_the_schema_rule_can_fail() -> None:
    """A latency module two hops away from a schema module is found, with its chain."""
    graph = _graph()
    assert "planner.schema.kinds" in graph["planner.schema.reports"]
    fake = {
        "planner.schema.reports": {"planner.deployment"},
        "planner.deployment": {"planner.latency.results"},
        "planner.latency.results": set(),
    }
    assert _schema_behind_the_api(fake) == [
        "planner.latency.results <- planner.deployment <- planner.schema.reports"
    ]


def test_the_adapter_rule_can_fail() -> None:
    """Every adapter prefix names modules, and an adapter importing the planner is caught."""
    graph = _graph()
    for prefix in ADAPTERS:
        assert any(_under(m, (prefix,)) for m in graph), prefix
    assert "planner.schema.plan_request" in graph["planner.server.proto_schema"]
    fake = {
        "planner.server.convert": {"planner.plan.pipeline", "planner.api"},
        "planner.api": {"planner.plan"},
    }
    assert _adapters_behind_the_api(fake) == {"planner.server.convert": ["planner.plan.pipeline"]}
    # A prefix matches whole components: planner.planner_x is not under planner.plan.
    assert not _under("planner.planner_x", ("planner.plan",))


def test_the_walker_sees_imports_and_circles() -> None:
    """The checks above can fail: the walker finds a known import and flags a made-up circle."""
    graph = _graph()
    assert "planner.errors" in graph["planner.validation"]
    assert any(d.startswith("solvers") for deps in graph.values() for d in deps)
    fake = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(fake) == [["a", "b", "c"]]
    assert _path_within(fake, ["a", "b", "c"]) == ["a", "b", "c", "a"]


@pytest.mark.parametrize("module", ["planner.simulate.replica_pool", "planner.workload", "planner.traces"])
def test_graph_covers(module: str) -> None:
    assert module in _graph()
