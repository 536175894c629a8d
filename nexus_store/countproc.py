"""Token counting in a helper process, so that a big import counts on another core.

tiktoken releases the GIL while it encodes, but it takes the GIL back for every text,
and an importer's main thread is busy with Python most of the time: counting on a
thread of the same process spends about as long waiting for the GIL as counting. A
helper process has its own interpreter and no such wait. It is started only for
imports longer than one batch, answers only once its encoder is loaded (the importer
counts in-process until then), and any failure of it (it cannot start, it dies, it
answers nonsense) makes the importer count in-process again: counts are the same
either way, since both sides run the same counter.

Protocol, over the helper's stdin and stdout: the helper writes ``R`` once ready; then
each request is a length-prefixed `marshal` of ``[(texts, images), ...]`` and each
answer a length-prefixed `marshal` of the counts. marshal round-trips every ``str``
exactly, lone surrogates included. The helper ignores SIGINT (Ctrl-C reaches the
whole process group; the importer decides what stops) and exits at end of input.

Run as ``python -m nexus_store.countproc COUNTER``.
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

__all__ = ["CountingProcess", "CountingProcessError"]

_LENGTH = struct.Struct("<Q")
_READY = b"R"
_SILENCE_SECONDS = 120  # a batch counts in well under a second; a huge message in seconds


class CountingProcessError(Exception):
    """The helper process failed; the caller counts in-process instead."""


class CountingProcess:
    """A helper process that counts message payloads with a built-in counter.

    Args:
        counter_name: A built-in counter name (see `nexus_store.tokens.get_counter`).
    """

    def __init__(self, counter_name: str) -> None:
        env = dict(os.environ)
        # The helper imports this package from wherever this process found it.
        here = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "nexus_store.countproc", counter_name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._ready = False
        self.failed = False

    def ready(self) -> bool:
        """Whether the helper has loaded its counter (never blocks)."""
        if self.failed:
            return False
        if self._ready:
            return True
        fd = self._stdout().fileno()
        readable, _, _ = select.select([fd], [], [], 0)
        if readable:
            if os.read(fd, 1) == _READY:
                self._ready = True
            else:
                self.failed = True  # it exited before it was ready
        return self._ready

    def count(self, payloads: Sequence[tuple[list[str], int]]) -> list[int]:
        """Count ``(texts, images)`` payloads in the helper.

        Raises:
            CountingProcessError: If the helper is gone or answers wrongly.
        """
        data = marshal.dumps(list(payloads))
        try:
            stdin = self._proc.stdin
            assert stdin is not None
            stdin.write(_LENGTH.pack(len(data)))
            stdin.write(data)
            stdin.flush()
            (size,) = _LENGTH.unpack(self._read(_LENGTH.size))
            counts = marshal.loads(self._read(size))
        except (OSError, ValueError, EOFError, TypeError, struct.error) as err:
            self.failed = True
            raise CountingProcessError(f"the counting process failed: {err}") from None
        if not (isinstance(counts, list) and len(counts) == len(payloads)):
            self.failed = True
            raise CountingProcessError("the counting process answered with the wrong shape")
        return counts

    def close(self) -> None:
        """End the helper: at end of input if it is serving, at once if it is still starting.

        (An import shorter than the helper's start-up must not wait for it to load.)
        """
        if not self._ready:
            self._proc.kill()
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def _stdout(self) -> IO[bytes]:
        out = self._proc.stdout
        assert out is not None
        return out

    def _read(self, size: int) -> bytes:
        # Unbuffered reads with a deadline: a helper that hangs is given up on.
        fd = self._stdout().fileno()
        chunks: list[bytes] = []
        left = size
        while left:
            readable, _, _ = select.select([fd], [], [], _SILENCE_SECONDS)
            if not readable:
                raise EOFError(f"the counting process said nothing for {_SILENCE_SECONDS}s")
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError("the counting process closed its output")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def main() -> None:
    """Serve counting requests on stdin/stdout until end of input."""
    from nexus_store.tokens import count_payloads, get_counter

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    counter = get_counter(sys.argv[1])
    counter.count(["ready"])  # load the encoder before saying so
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    out.write(_READY)
    out.flush()
    while True:
        head = inp.read(_LENGTH.size)
        if len(head) != _LENGTH.size:
            return
        (size,) = _LENGTH.unpack(head)
        payloads = marshal.loads(inp.read(size))
        data = marshal.dumps(count_payloads(counter, payloads))
        out.write(_LENGTH.pack(len(data)))
        out.write(data)
        out.flush()


if __name__ == "__main__":
    main()
