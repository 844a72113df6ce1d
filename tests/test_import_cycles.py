"""No import cycle among the project's modules (basedie, sysmodel, rtl, tb), found statically from their source:
every import statement counts, those inside functions too (a lazy import still makes the two modules depend on
each other)."""
import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGES = ("basedie", "sysmodel", "rtl", "tb")


def modules() -> dict[str, Path]:
    """Dotted module name → source file; a package is its __init__.py."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project's modules that the module `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            origin = ".".join(base + ([node.module] if node.module else []))
            candidates = [f"{origin}.{alias.name}" for alias in node.names] + [origin]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:        # `import a.b.c` of a module a.b: a.b
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
                break
    return targets


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_the_scan_sees_the_imports_that_matter() -> None:
    edges = graph()
    assert "sysmodel.config" in edges["sysmodel.simulate"]                    # from .config import ...
    assert "basedie.simulation" in edges["basedie.cli"]                       # from basedie.simulation import ...
    assert "basedie.verified" in edges["sysmodel.simulate"]                   # from basedie import verified
    assert "sysmodel.hbf.layout" in edges["sysmodel.config"]                  # from .hbf.layout import ...
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_projects_modules() -> None:
    assert cycles(graph()) == []
