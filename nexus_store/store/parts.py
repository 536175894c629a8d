"""The store's parts, each made on first use (issue 17: start-up).

`Store` names its parts as attributes (``_reading``, ``_appends``, ...). The first
lookup of one calls `make_part`, which imports that part's module and builds it
from the handle and the parts it takes; the store keeps it. A command therefore
imports only the parts it calls: ``nexus-store context status`` needs `Reading`,
not the importers, formats, compaction, gc or copy. Parts have no side effect on
the handle when they are built, so building one later changes nothing.

`part_classes` lists the part classes in the order the facade takes its
docstrings from them (`nexus_store.store.facade_docs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nexus_store.store.facade import Store

__all__ = ["PART_NAMES", "make_part", "part_classes"]

PART_NAMES = frozenset(
    {
        "_reading",
        "_sessions",
        "_appends",
        "_searcher",
        "_ingester",
        "_importer",
        "_exporter",
        "_workspaces",
        "_doctoring",
        "_collector",
        "_copier",
        "_compaction",
        "_backup",
    }
)
"""The attribute names of `Store` that `make_part` builds."""


def make_part(store: Store, name: str) -> object:
    """Import and build the part ``store.<name>`` (the parts it takes come from ``store``).

    Args:
        store: The store the part belongs to.
        name: The attribute name, one of `PART_NAMES`.

    Returns:
        The new part.

    Raises:
        AttributeError: If ``name`` is not a part (the store has no such attribute).
    """
    if name not in PART_NAMES:
        raise AttributeError(f"{type(store).__name__!r} object has no attribute {name!r}")
    handle = store.handle
    if name == "_reading":
        from nexus_store.store.reading import Reading

        return Reading(handle)
    if name == "_sessions":
        from nexus_store.store.sessions import Sessions

        return Sessions(handle, store._reading)
    if name == "_appends":
        from nexus_store.store.appends import Appends

        return Appends(handle, store._reading)
    if name == "_searcher":
        from nexus_store.store.search import Search

        return Search(handle)
    if name == "_ingester":
        from nexus_store.store.ingest import Ingest

        return Ingest(handle, store._reading)
    if name == "_importer":
        from nexus_store.store.importing import Importer

        return Importer(store._ingester)
    if name == "_exporter":
        from nexus_store.store.export import Export

        return Export(handle, store._reading, store._ingester)
    if name == "_workspaces":
        from nexus_store.store.workspace import Workspace

        return Workspace(handle)
    if name == "_doctoring":
        from nexus_store.store.doctor import Doctor

        return Doctor(handle)
    if name == "_collector":
        from nexus_store.store.gc import Gc

        return Gc(handle, store._reading)
    if name == "_copier":
        from nexus_store.store.copy import Copy

        return Copy(handle, store._reading, store._exporter, store._ingester)
    if name == "_compaction":
        from nexus_store.compaction.runner import Compaction

        return Compaction(store)
    from nexus_store.store.backup import Backup

    return Backup(handle)


def part_classes() -> tuple[type, ...]:
    """The part classes whose method docstrings the facade's methods carry, in order.

    The first class (in this order) with a documented method of a facade method's
    name gives it its docstring. Calling this imports every part.
    """
    from nexus_store.compaction.runner import Compaction
    from nexus_store.store.appends import Appends
    from nexus_store.store.copy import Copy
    from nexus_store.store.doctor import Doctor
    from nexus_store.store.export import Export
    from nexus_store.store.gc import Gc
    from nexus_store.store.importing import Importer
    from nexus_store.store.ingest import Ingest
    from nexus_store.store.reading import Reading
    from nexus_store.store.search import Search
    from nexus_store.store.sessions import Sessions
    from nexus_store.store.workspace import Workspace

    return (
        Reading,
        Sessions,
        Appends,
        Ingest,
        Importer,
        Export,
        Search,
        Workspace,
        Doctor,
        Gc,
        Copy,
        Compaction,
    )
