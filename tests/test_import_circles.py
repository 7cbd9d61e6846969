"""No import circles inside a package: the modules of each package of ``reconciler`` import one
another in one direction only, so each can be read from what it stands on.

Every import counts, at a module's top or inside a function (a lazy import still runs); a
package's ``__init__`` is one of its modules. An import only for type checking (under
``if TYPE_CHECKING:``) may point back: at run time no package holds a circle. Counted with those
too, the packages in ``KNOWN`` still do, each for the reason given; no other may start one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import reconciler

ROOT = Path(reconciler.__file__).parent
#: Packages whose modules point back to each other through imports for type checking only.
KNOWN = {
    # the parts of a client name the client they serve (batch, placement → HttpCluster)
    "reconciler.clusters": "a part's signature names its client",
    "reconciler.clusters.slurm": "a part's signature names its client (outlook, rerun → SlurmCluster)",
    "reconciler.controlplane": "rerun's signature names the Engine it serves",
    "reconciler.templates": "parameters and sandbox name the Template they read",
    "reconciler.runspec": "secrets' helpers name the Run they read (models holds their fields)",
}


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path) -> str:
    module = _module_of(path)
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: set[str], typing: bool = False) -> set[str]:
    """The modules of ``reconciler`` that ``path`` imports at run time (``typing``: and for
    type checking)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _package_of(path)
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node) and not typing:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:  # ``from . import flags``: the module flags
                if f"{origin}.{alias.name}" in modules:
                    found.add(f"{origin}.{alias.name}")
                elif origin in modules:
                    found.add(origin)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _circles(typing: bool = False) -> dict[str, list[list[str]]]:
    """Each package's circles (strongly connected groups of two modules or more)."""
    paths = {_module_of(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    package = {m: _package_of(p) for m, p in paths.items()}
    edges = {
        m: {n for n in _imports(p, modules, typing) if n != m and package.get(n) == package[m]}
        for m, p in paths.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: dict[str, list[list[str]]] = {}

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.setdefault(package[v], []).append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_no_package_holds_an_import_circle_at_run_time():
    assert _circles() == {}


def test_only_the_known_packages_point_back_through_imports_for_type_checking():
    assert sorted(_circles(typing=True)) == sorted(KNOWN)
