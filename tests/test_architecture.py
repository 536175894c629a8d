"""The package's shape stays what docs/architecture.md says (issue 14).

No import circle anywhere in ``nexus_store`` (imports under ``if TYPE_CHECKING:``
aside), no module over 600 lines, no ``type: ignore`` in ``store/`` without a
reason on the same line, no mixins, and a `Store` whose public methods are each one
call into a part.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

from nexus_store import Store

PACKAGE = Path(__file__).resolve().parents[1] / "nexus_store"
MAX_LINES = 600


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Each module of nexus_store -> the modules of nexus_store it imports at run time.

    ``from package import name`` counts as importing ``package.name`` when that is a
    module, else the package itself. Imports inside functions count (they run).
    """
    files = {_module(f): f for f in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in files else base)
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (a list of modules, first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


class TestImports:
    def test_no_import_circle_in_the_package(self) -> None:
        circle = find_circle(import_graph())
        assert circle is None, " -> ".join(circle or [])

    def test_the_walk_finds_a_circle_when_there_is_one(self) -> None:
        graph = import_graph()
        # a part that imported the facade back would close a circle
        graph["nexus_store.store.reading"].add("nexus_store.store.facade")
        circle = find_circle(graph)
        assert circle is not None and "nexus_store.store.facade" in circle

    def test_type_checking_imports_are_not_counted(self) -> None:
        graph = import_graph()
        # the compaction runner names Store only for mypy: no run-time edge to the facade
        assert "nexus_store.store.facade" not in graph["nexus_store.compaction.runner"]
        assert "nexus_store.compaction.runner" not in graph["nexus_store.store.facade"]
        # ... while an import inside a function counts: the facade's parts are made there
        assert "nexus_store.compaction.runner" in graph["nexus_store.store.parts"]


class TestModules:
    def test_no_module_over_600_lines(self) -> None:
        long = {
            str(f.relative_to(PACKAGE)): n
            for f in PACKAGE.rglob("*.py")
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES
        }
        assert long == {}

    def test_every_type_ignore_in_store_gives_a_reason(self) -> None:
        bare = []
        for path in (PACKAGE / "store").rglob("*.py"):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                match = re.search(r"#\s*type:\s*ignore(\[[^\]]*\])?(.*)$", line)
                if match and not re.search(r"\w", match.group(2)):
                    bare.append(f"{path.name}:{n}")
        assert bare == []

    def test_no_mixins_and_no_stubs_for_other_classes(self) -> None:
        for path in (PACKAGE / "store").rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    assert not node.name.endswith("Mixin"), f"{path.name}: {node.name}"
                if isinstance(node, ast.Raise) and node.exc is not None:
                    assert "NotImplementedError" not in ast.unparse(node.exc), path.name


class TestFacade:
    def test_every_public_method_is_one_call_into_a_part(self) -> None:
        for name, member in vars(Store).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            tree = ast.parse(textwrap.dedent(inspect.getsource(member)))
            body = tree.body[0].body  # type: ignore[attr-defined]  # a def's body
            docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            statements = body[1:] if docstring else body
            assert len(statements) <= 2, name
            if name != "atomic":
                assert len(statements) == 1, name

    def test_facade_methods_carry_the_parts_documentation(self) -> None:
        assert Store.append_entry.__doc__ is not None
        assert "Raises:" in Store.append_entry.__doc__
        assert "Example:" in (Store.search.__doc__ or "")
