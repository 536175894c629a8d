"""Documentation for the facade's one-line methods, taken from the parts they call."""

from __future__ import annotations

from collections.abc import Iterable


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
