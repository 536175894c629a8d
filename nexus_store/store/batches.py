"""Entries in batches with their token counts, counted beside the writing (for `Ingest`).

A bulk write (an import, a copy) takes entries in batches of `BATCH`; each batch's
messages are counted on a second thread (or, for the built-in tiktoken counter, in a
helper process: `nexus_store.countproc`) while this thread parses the next batch and
writes the previous one.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from nexus_store.countproc import CountingProcess, CountingProcessError
from nexus_store.rows import turn_payload
from nexus_store.tokens import Cl100kCounter, count_payloads, message_payload

__all__ = ["BATCH", "Item", "Payload", "Prepared", "prepared_batches"]

BATCH = 500
"""Entries per batch (and turn keys taken per allocation)."""

Item = tuple[int, dict[str, Any], Mapping[str, Any] | None]
Payload = tuple[str, frozenset[str], list[dict[str, Any]]]
Prepared = tuple[list[Item], list[Payload], list[int]]


def prepared_batches(entries: Iterable[Item], counter: Any) -> Iterator[Prepared]:
    """Batches of entries with their token counts; counting overlaps the rest.

    Token counting is the one long step that runs without the GIL (tiktoken's encoder
    releases it), so it alone goes to a second thread: while batch N is counted there,
    this thread parses batch N+1 and then writes batch N (SQLite releases the GIL too).
    Parsing stays here: two threads both running Python would only take turns. From
    the second batch on, the built-in tiktoken counter counts in a helper process once
    that is ready (see `nexus_store.countproc`: the counting thread otherwise waits for
    the GIL about as long as it counts). At most two batches are in flight, so memory
    stays flat. An error on either side is raised here, and stopping early waits for
    at most one batch being counted.
    """
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nexus-count")
    helper: CountingProcess | None = None

    def count(payloads: list[tuple[list[str], int]]) -> list[int]:
        if helper is not None and helper.ready():
            try:
                return helper.count(payloads)
            except CountingProcessError:
                pass  # counted here instead, from now on (same counter, same counts)
        return count_payloads(counter, payloads)

    try:
        pending: tuple[list[Item], list[Payload], Future[list[int]]] | None = None
        batch: list[Item] = []
        batches = 0
        for item in itertools.chain(entries, [None]):
            if item is not None:
                batch.append(item)
                if len(batch) < BATCH:
                    continue
            ready = None
            if batch:
                batches += 1
                if batches == 2 and helper is None and type(counter) is Cl100kCounter:
                    helper = _start_helper(counter.name)
                payloads = [turn_payload(entry) for _, entry, _ in batch]
                texts = [message_payload(m) for _, _, messages in payloads for m in messages]
                ready = (batch, payloads, pool.submit(count, texts))
                batch = []
            if pending is not None:
                done, done_payloads, counted = pending
                yield done, done_payloads, counted.result()
            pending = ready
        if pending is not None:
            yield pending[0], pending[1], pending[2].result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if helper is not None:
            helper.close()


def _start_helper(counter_name: str) -> CountingProcess | None:
    if sys.platform == "win32":  # select() does not wait on pipes there: count here
        return None
    try:
        return CountingProcess(counter_name)
    except OSError:  # no interpreter to run (an embedded or frozen Python): count here
        return None
