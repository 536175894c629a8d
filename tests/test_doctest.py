"""Every ``>>>`` example in nexus_store's docstrings runs, module by module.

STYLE.md: "Doc examples, ``>>>`` docstrings included, run under test". The modules are
found by walking the package, so a new module's examples run without touching this file.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import nexus_store

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _module_names() -> list[str]:
    names = ["nexus_store"]
    for info in pkgutil.walk_packages(nexus_store.__path__, "nexus_store."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # importing it runs the CLI
        names.append(info.name)
    return sorted(names)


MODULES = _module_names()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) in {name} failed (see above)"


def test_the_walk_finds_the_examples() -> None:
    """Guards the walk itself: a finder that found nothing would pass every module."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    counts = {
        name: sum(len(t.examples) for t in finder.find(importlib.import_module(name), name))
        for name in MODULES
    }
    assert {"nexus_store.blocks", "nexus_store.compaction.runner", "nexus_store.aio"} <= {
        name for name, count in counts.items() if count
    }
    assert sum(counts.values()) >= 40
    assert {"nexus_store.compaction.plan", "nexus_store.store", "nexus_store.cli"} <= set(MODULES)
