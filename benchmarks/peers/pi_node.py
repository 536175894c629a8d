"""pi-coding-agent's own ``SessionManager`` (node), driven by ``pi_session.mjs``.

Install: ``npm install @mariozechner/pi-coding-agent`` under ``benchmarks/.work/node``
(``run.py --install-pi`` does it; the version is printed with the results). The
harness hands this peer the same pi v3 file the Python JSONL peer reads, so both load
byte-identical histories. Timings are taken inside node (``process.hrtime``), so node's
start-up is not counted. Appends use ``appendMessage``/``appendCompaction``
(``appendFileSync`` per entry, no fsync). Context is ``SessionManager.open(file)`` +
``buildSessionContext()`` — what a resumed agent pays — and the warm in-memory rebuild is
reported beside it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import Peer

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE.parent / ".work" / "node"
PKG_DIR = NODE_DIR / "node_modules" / "@mariozechner" / "pi-coding-agent"
SCRIPT = HERE / "pi_session.mjs"


def pi_version() -> str | None:
    """The installed pi-coding-agent version, or None."""
    try:
        return str(json.loads((PKG_DIR / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


#: Set by run.py --install-pi: npm-install the package when it is missing. Off by default
#: so that a --quick run never waits on the network.
INSTALL = False


def ensure_installed() -> str | None:
    """Check (and with INSTALL, npm-install) pi-coding-agent under .work/node; why not, or None."""
    if shutil.which("node") is None:
        return "node not found"
    if pi_version():
        return None
    if shutil.which("npm") is None:
        return "npm not found"
    if not INSTALL:
        return (
            "@mariozechner/pi-coding-agent not installed under benchmarks/.work/node "
            "(pass --install-pi to npm-install it)"
        )
    NODE_DIR.mkdir(parents=True, exist_ok=True)
    if not (NODE_DIR / "package.json").exists():
        (NODE_DIR / "package.json").write_text('{"private": true}\n')
    r = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "@mariozechner/pi-coding-agent"],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
    )
    if r.returncode or not pi_version():
        return "npm install @mariozechner/pi-coding-agent failed: " + r.stderr.strip()[-200:]
    return None


class PiNodePeer(Peer):
    """pi's SessionManager in node, reading the shared pi v3 file."""

    name = "pi SessionManager (node)"
    compaction = True
    branches = True
    batch = False
    durability = "no fsync"

    def __init__(self, workdir: Path, synchronous: str = "NORMAL") -> None:
        super().__init__(workdir, synchronous)
        self.file: Path | None = None

    @classmethod
    def unavailable(cls) -> str | None:
        return ensure_installed()

    def _call(self, req: dict[str, Any]) -> Any:
        r = subprocess.run(
            ["node", str(SCRIPT), json.dumps(req)],
            capture_output=True,
            text=True,
            env={"PI_PACKAGE_DIR": str(PKG_DIR), "PATH": "/usr/bin:/bin:/usr/local/bin"},
            check=False,
        )
        if r.returncode:
            raise RuntimeError("pi_session.mjs failed: " + r.stderr.strip()[-500:])
        return json.loads(r.stdout)

    def use_file(self, path: Path) -> None:
        """Load histories from this pi v3 file (written by the JSONL peer or the harness)."""
        self.file = path

    def build(self, entries: Iterable[dict[str, Any]]) -> None:
        raise NotImplementedError("the harness hands pi the shared JSONL file")

    def timed_append(self, entries: list[dict[str, Any]]) -> list[float]:
        """Seconds per append, measured in node."""
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", dir=self.dir, delete=False) as f:
            for e in entries:
                f.write(json.dumps(e) + "\n")
        res = self._call({"cmd": "append", "dir": str(self.dir / "sessions"), "entries": f.name})
        Path(f.name).unlink()
        self.file = Path(res["file"])
        return [float(x) for x in res["lat"]]

    def timed_context(self, reps: int) -> tuple[list[float], list[float], int]:
        """(cold open+build seconds, warm build seconds, message count)."""
        res = self._call({"cmd": "context", "file": str(self.file), "reps": reps})
        return res["cold"], res["warm"], int(res["n"])

    def timed_branches(self, leaves: list[str]) -> tuple[list[float], list[int]]:
        """Seconds per branch(id) + buildSessionContext(), and message counts."""
        res = self._call({"cmd": "branches", "file": str(self.file), "leaves": leaves})
        return res["lat"], res["ns"]

    def disk_bytes(self) -> int:
        return self.file.stat().st_size if self.file else 0
