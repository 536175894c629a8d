"""Documentation for the facade's one-line methods, taken from the parts they call.

The parts are imported when they are first used (`nexus_store.store.parts`), so
their docstrings cannot be copied when the facade is defined without paying for
every part at start-up (issue 17). `PartDocs`, the facade's metaclass, copies them
the first time a public name is looked up on the class itself: ``help(Store)``,
``help(Store.append_entry)``, ``inspect.getdoc(Store.search)`` and documentation
tools all do that; a program that only calls methods on a store never does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["PartDocs", "copy_part_docs", "document_from_parts"]

# Facades whose docs are still to be copied -> the function that imports their parts.
_pending: dict[type, Callable[[], Iterable[type]]] = {}


def copy_part_docs(facade: type, parts: Iterable[type]) -> None:
    """Give each public one-line method of ``facade`` the docstring of the part method it calls.

    The first part (in order) that has a method of the same name with a docstring
    wins, so ``help(Store.append_entry)`` shows the part's full documentation.

    Args:
        facade: The facade class whose methods are documented in place.
        parts: The part classes, searched in this order.
    """
    parts = tuple(parts)
    for name, method in vars(facade).items():
        if name.startswith("_") or not callable(method):
            continue
        for part in parts:
            source = getattr(part, name, None)
            if source is not None and source.__doc__:
                method.__doc__ = source.__doc__
                break


def document_from_parts(facade: type, parts: Callable[[], Iterable[type]]) -> None:
    """Copy the parts' docstrings onto ``facade`` when a public name is first looked up on it.

    Args:
        facade: A class whose metaclass is `PartDocs`.
        parts: Returns the part classes in order (see `copy_part_docs`); called once.
    """
    _pending[facade] = parts


class PartDocs(type):
    """The metaclass of a facade documented by `document_from_parts`.

    Looking up a public name on the class (not on an instance) first copies the
    pending docstrings; afterwards it costs one dictionary test.
    """

    def __getattribute__(cls, name: str) -> Any:
        """Copy the parts' docstrings before the first public name is read from the class."""
        if _pending and not name.startswith("_"):
            for facade, parts in list(_pending.items()):
                del _pending[facade]
                copy_part_docs(facade, parts())
        return super().__getattribute__(name)
