"""The server's packages import downward only, in the layer order docs/design.md opens with, and
no module imports itself through others (no cycle). An AST walk of every import, the ones inside
functions and under TYPE_CHECKING too: an import put off to run time is still a dependency."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "server" / "celestial_memory"
PACKAGE = "celestial_memory"

# Top to bottom; a module may import its own layer's packages and any layer below. Within a
# layer the packages must not import each other in a circle either (checked below).
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("composition root", frozenset({"app", "main"})),
    ("api", frozenset({"api", "ops", "access"})),
    ("memory services", frozenset({"memory"})),
    ("capabilities", frozenset({"recall", "zones", "graph", "understanding", "reflection",
                                "encoding", "ranking", "policy", "sharing"})),
    ("store", frozenset({"store"})),
    ("domain", frozenset({"domain"})),
    ("shared", frozenset({"config", "config_checks", "config_serving", "errors", "clock",
                         "observability"})),
]
RANK = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def imports(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The project modules ``source`` imports, as dotted names: ``from pkg import mod`` depends
    on the module mod, ``from mod import name`` on the module mod."""
    found: set[str] = set()
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                stem = base[: len(base) - node.level + 1]
                target = ".".join([*stem, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for a in node.names:
                if f"{target}.{a.name}" in known:
                    found.add(f"{target}.{a.name}")
                elif target in known:
                    found.add(target)
    return found


def graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    known = set(sources)
    return {m: imports(src, m, pkg, known) - {m} for m, (src, pkg) in sources.items()}


def unit(module: str) -> str:
    """The layer unit a module belongs to: its first package, or the root module's name."""
    return module.split(".")[1] if "." in module else ""


def upward(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import of a higher layer, as 'importer -> imported'."""
    bad = []
    for m, ds in deps.items():
        for d in ds:
            if unit(d) and unit(m) and RANK[d_unit := unit(d)] < RANK[unit(m)]:
                bad.append(f"{m} -> {d} ({LAYERS[RANK[unit(m)]][0]} imports {d_unit}, "
                           f"{LAYERS[RANK[d_unit]][0]})")
    return sorted(bad)


def cycle(deps: Mapping[str, Iterable[str]]) -> list[str]:
    """One cycle among the nodes, as the list of its nodes; empty when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for d in sorted(deps.get(n, ())):
            if state.get(d) == 1:
                return [*stack[stack.index(d):], d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[n] = 2
        return []

    for n in sorted(deps):
        if n not in state and (found := visit(n)):
            return found
    return []


def package_graph(deps: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m, ds in deps.items():
        out.setdefault(unit(m), set()).update(unit(d) for d in ds if unit(d) != unit(m))
    return out


def project() -> dict[str, tuple[str, bool]]:
    return {module_name(p, ROOT): (p.read_text(), p.name == "__init__.py")
            for p in ROOT.rglob("*.py")}


def test_every_package_has_a_layer() -> None:
    units = {unit(m) for m in project()}
    assert units - set(RANK) == set(), "a package docs/design.md's layer map does not place"


def test_no_module_imports_upward() -> None:
    assert upward(graph(project())) == []


def test_no_import_cycle_between_modules_or_packages() -> None:
    deps = graph(project())
    assert cycle(deps) == []
    assert cycle(package_graph(deps)) == []


def test_the_check_fails_on_an_upward_import_and_a_cycle() -> None:
    """The check itself: the store importing the memory services is refused, and so is a
    capability package importing another that imports it back."""
    sources = project()
    sources[f"{PACKAGE}.store.repository"] = (
        sources[f"{PACKAGE}.store.repository"][0]
        + "\nfrom celestial_memory.memory.service import MemoryService\n", False)
    bad = upward(graph(sources))
    assert bad == [f"{PACKAGE}.store.repository -> {PACKAGE}.memory.service "
                   "(store imports memory, memory services)"]

    sources = project()
    sources[f"{PACKAGE}.zones.rebalancer"] = (
        sources[f"{PACKAGE}.zones.rebalancer"][0]
        + "\nfrom celestial_memory.graph import relations\n", False)
    deps = graph(sources)
    assert upward(deps) == []  # the same layer: allowed as such...
    assert "zones" in cycle(package_graph(deps))  # ...but graph already imports zones


def test_layout_docs_open_with_the_same_map() -> None:
    """docs/design.md and docs/layout.md name every package the tree has."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    for page in ("design.md", "layout.md"):
        head = (docs / page).read_text().split("\n## ")[0 if page == "layout.md" else 1]
        missing = {p for p in packages if f"{p}/" not in head}
        assert missing == set(), f"{page}'s map lacks {sorted(missing)}"


CLIENT = Path(__file__).resolve().parents[2] / "client" / "celestial_client"


def test_package_roots_stay_small_and_modules_short() -> None:
    """The roots hold what every layer shares; a module of one concept fits in 400 lines."""
    assert len(list(ROOT.glob("*.py"))) <= 8
    assert len(list(CLIENT.glob("*.py"))) <= 12
    long = {str(p.relative_to(ROOT.parents[1])): n
            for base in (ROOT, CLIENT) for p in base.rglob("*.py")
            if "v1" not in p.parts and (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_the_client_library_does_not_import_its_cli() -> None:
    """The command line is built on the library, never the other way round."""
    for p in CLIENT.rglob("*.py"):
        if "cli" in p.relative_to(CLIENT).parts or "v1" in p.parts:
            continue
        tree = ast.parse(p.read_text())
        named = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
        named += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in named if m.split(".")[:2] == ["celestial_client", "cli"]], p
