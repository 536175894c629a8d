"""The compaction package sits above the storage layer (issue 14).

It is handed a `Store` and writes through its public methods: nothing in
``nexus_store/compaction/`` imports the store package at run time (only under
``if TYPE_CHECKING:``, for annotations), nor a database driver, nor click.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nexus_store.compaction

PACKAGE = Path(nexus_store.compaction.__file__).parent
FORBIDDEN = ("nexus_store.store", "nexus_store.cli", "sqlite3", "sqlite_utils", "psycopg", "click")


def _runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """Imported module names outside ``if TYPE_CHECKING:`` blocks, with their lines."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_compaction_never_imports_the_store_at_run_time(path: Path) -> None:
    imports = _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))
    assert imports, f"no imports parsed from {path.name}"
    bad = [
        (line, name)
        for line, name in imports
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert not bad, f"{path.name} imports {bad} at run time; take the Store as an argument"


def test_the_check_sees_an_import_outside_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from nexus_store.store import Store\n"
        "def f():\n    from nexus_store.store.core import Store\n"
    )
    names = [name for _, name in _runtime_imports(ast.parse(source))]
    assert names == ["typing.TYPE_CHECKING", "nexus_store.store.core.Store"]


def test_store_methods_delegate_to_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Store.compact` and its siblings are calls into nexus_store.compaction.Compaction."""
    from nexus_store import Store
    from nexus_store.compaction import Compaction

    calls: list[str] = []
    for name in ("compact", "navigate_with_summary", "pruned_context", "compaction_history"):
        monkeypatch.setattr(Compaction, name, lambda *a, _n=name, **k: calls.append(_n) or _n)
    with Store(memory=True, counter="chars4") as store:
        s = store.create_session()
        assert store.compact(s.id, dry_run=True) == "compact"
        assert store.navigate_with_summary(s.id, None) == "navigate_with_summary"
        assert store.pruned_context(s.id) == "pruned_context"
        assert store.compaction_history(s.id) == "compaction_history"
    assert calls == ["compact", "navigate_with_summary", "pruned_context", "compaction_history"]
