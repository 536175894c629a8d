"""Start-up of the command line (issue 17): ``nexus-store context status`` on a big session.

The target is the whole command, process start included: under 150 ms wall on a
100k-turn session. The command's own work (open, resolve, an O(1) status) is tens of
milliseconds; the rest is Python starting and importing. Each run is a fresh process;
the table gives the median wall and CPU time (user + system of the child, from
``os.wait4``) of N runs of:

* ``python -c pass``: the floor (the interpreter alone);
* ``python -c "import nexus_store.cli"``: the CLI's imports, no command;
* ``nexus-store context status SESSION``: the command (the console script next to the
  interpreter, else ``python -m nexus_store``), with its bytecode cached as in an
  installed package (pip compiles it; a checkout writes it on first import);
* the same command with no bytecode of nexus_store: a fresh copy of the package with
  ``PYTHONDONTWRITEBYTECODE=1``, so every run compiles its modules again (what a
  checkout costs where that variable is set, as on some CI and sandbox machines; the
  dependencies keep their installed bytecode).

The runs interleave the commands, in a new order each round, so that a load change
hits each alike and no command always follows the same one. The wall
figure is what the target names; on a shared machine read the CPU column (see
README.md). ``--against DIR`` adds the same two nexus_store rows for another source
tree (``PYTHONPATH=DIR``, e.g. ``git archive`` of an older commit), an A/B in one run.

run.py calls `run_startup` (workload ``startup``); alone::

    python benchmarks/bench_startup.py --turns 100000 --runs 21 [--against /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

import workload  # noqa: E402

WORK = HERE / ".work" / "startup"
TARGET_S = 0.150


def ensure_db(turns: int, work: Path = WORK) -> tuple[Path, str]:
    """The database of one generated session of ``turns`` turns with compactions (built once).

    Returns:
        The database file and the session id.
    """
    from nexus_store import Store

    work.mkdir(parents=True, exist_ok=True)
    path = work / f"status-{turns}.db"
    done = path.with_suffix(".done")
    if path.exists() and done.exists():
        return path, done.read_text().strip()
    for stale in (path, done):
        stale.unlink(missing_ok=True)
    entries = workload.history(turns, compact_near_leaf=True, compact_every=10_000)
    with Store(path) as store:  # the default counter, as a user's database has
        sid = store.create_session(cwd="/repo").id
        chunk: list[dict[str, Any]] = []
        for e in entries:
            chunk.append(e)
            if len(chunk) == 5_000:
                _append(store, sid, chunk)
        _append(store, sid, chunk)
    done.write_text(sid + "\n")
    return path, sid


def _append(store: Any, sid: str, chunk: list[dict[str, Any]]) -> None:
    with store.atomic():
        for e in chunk:
            store.append_entry(sid, e)
    chunk.clear()


Command = tuple[list[str], dict[str, str]]  # argv, environment


def status_command(db: Path, sid: str, tree: Path | None = None, *, cached: bool = True) -> Command:
    """``nexus-store context status`` (the console script if installed, else ``-m``).

    With ``tree``, nexus_store is imported from that source tree (``PYTHONPATH``);
    ``cached=False`` runs it without bytecode (see `_env`).
    """
    script = Path(sys.executable).with_name("nexus-store")
    args = ["--db", str(db), "context", "status", sid]
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "nexus_store"]
    return [*argv, *args], _env(tree, cached=cached)


def _env(tree: Path | None, *, cached: bool = True) -> dict[str, str]:
    # Cached: as in an installed package (pip compiles it; a checkout writes it on first
    # import). PYTHONDONTWRITEBYTECODE (set on some CI and sandbox machines) is dropped,
    # and the cache goes under .work/, not the tree. Not cached: the variable is set and
    # no prefix is given, so a tree without __pycache__ (`fresh_tree`) is compiled at
    # every start while the dependencies keep their installed bytecode.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    if cached:
        env["PYTHONPYCACHEPREFIX"] = str(WORK / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def fresh_tree(work: Path = WORK) -> Path:
    """A copy of this nexus_store (package and schema) without any bytecode."""
    tree = work / "uncached-tree"
    shutil.rmtree(tree, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "nexus_store", tree / "nexus_store", ignore=skip)
    shutil.copytree(ROOT / "schema", tree / "schema", ignore=skip)
    return tree


def run_once(command: Command) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one child process; it must exit 0."""
    argv, env = command
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=WORK.parent
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(commands: dict[str, Command], runs: int) -> dict[str, dict[str, float]]:
    """Median and p90 wall and CPU of each command over ``runs`` interleaved runs."""
    for command in commands.values():  # warm the page cache and .pyc files
        run_once(command)
    walls: dict[str, list[float]] = {k: [] for k in commands}
    cpus: dict[str, list[float]] = {k: [] for k in commands}
    order = list(commands)
    shuffle = random.Random(17).shuffle  # the same orders in every run of the benchmark
    for _ in range(runs):
        shuffle(order)
        for name in order:
            wall, cpu = run_once(commands[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    out = {}
    for name in commands:
        w, c = sorted(walls[name]), sorted(cpus[name])
        out[name] = {
            "wall": statistics.median(w),
            "wall_p90": w[min(len(w) - 1, int(0.9 * len(w)))],
            "cpu": statistics.median(c),
        }
    return out


STATUS = "context status"
UNCACHED = "context status, no bytecode cache"


def commands_for(
    db: Path, sid: str, against: Path | None = None, work: Path = WORK
) -> dict[str, Command]:
    """The commands the table compares (see the module docstring)."""
    imports = [sys.executable, "-c", "import nexus_store.cli"]
    commands: dict[str, Command] = {
        "python -c pass": ([sys.executable, "-c", "pass"], _env(None)),
        "import nexus_store.cli": (imports, _env(None)),
        STATUS: status_command(db, sid),
        UNCACHED: status_command(db, sid, fresh_tree(work), cached=False),
    }
    if against is not None:
        commands["import nexus_store.cli (against)"] = (imports, _env(against))
        commands["context status (against)"] = status_command(db, sid, against)
    return commands


def run_startup(
    turns: int,
    runs: int,
    add: Callable[..., dict[str, Any]],
    note: Callable[[str], None],
    work: Path = WORK,
    against: Path | None = None,
) -> None:
    """Measure and record (``add(workload, peer, size, times, **extra)``) the start-up table."""
    print(f"\n== startup: nexus-store context status, {turns:,} turns, {runs} runs", flush=True)
    db, sid = ensure_db(turns, work)
    try:
        run_once(status_command(db, sid))
    except RuntimeError as err:
        note(f"startup skipped: {err}")
        return
    figures = measure(commands_for(db, sid, against, work), runs)
    floor = figures["python -c pass"]
    for name, f in figures.items():
        add(
            "startup",
            name,
            turns,
            [f["wall"]],
            cpu_s=f["cpu"],
            wall_p90_s=f["wall_p90"],
            above_floor_s=f["wall"] - floor["wall"],
            runs=runs,
        )
        print(
            f"  {name:36s} wall median {f['wall'] * 1e3:7.1f} ms  p90 {f['wall_p90'] * 1e3:7.1f} ms"
            f"  CPU median {f['cpu'] * 1e3:7.1f} ms",
            flush=True,
        )


def render(records: list[dict[str, Any]]) -> list[str]:
    """The report's start-up section from run_startup's records (workload ``startup``)."""
    rows = [r for r in records if r["workload"] == "startup"]
    if not rows:
        return []
    title = (
        f"startup: a fresh process on a {rows[0]['size']:,}-turn session "
        f"(medians of {rows[0].get('runs', '?')} interleaved runs)"
    )
    out = [title, "-" * len(title)]
    for r in rows:
        out.append(
            f"  {r['peer']:36s} wall {r['median_s'] * 1e3:7.1f} ms  p90 "
            f"{r['wall_p90_s'] * 1e3:7.1f} ms  CPU {r['cpu_s'] * 1e3:7.1f} ms"
        )
    return out


def target(records: list[dict[str, Any]]) -> tuple[str, str, bool | None]:
    """The target line: its name, the figures, and whether it is met (None: not measured)."""
    status = next((r for r in records if r["workload"] == "startup" and r["peer"] == STATUS), None)
    if status is None:
        return "context status < 150 ms wall", "not measured", None
    cold = next((r for r in records if r["workload"] == "startup" and r["peer"] == UNCACHED), None)
    value = f"{status['median_s'] * 1e3:.0f} ms wall, {status['cpu_s'] * 1e3:.0f} ms CPU"
    if cold is not None:
        value += f" ({cold['median_s'] * 1e3:.0f} ms wall without bytecode cache)"
    name = (
        f"context status at {status['size']:,} turns < {TARGET_S * 1e3:.0f} ms wall "
        "(process start included, bytecode cached)"
    )
    return name, value, status["median_s"] < TARGET_S


def main() -> int:
    """Print the start-up table for one session size."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--build-only", action="store_true", help="only build the database")
    parser.add_argument("--against", type=Path, help="another source tree to compare (A/B)")
    args = parser.parse_args()
    if args.build_only:
        db, sid = ensure_db(args.turns)
        print(db, sid)
        return 0
    records: list[dict[str, Any]] = []

    def add(workload_: str, peer: str, size: int, times: list[float], **extra: Any) -> Any:
        records.append(
            {"workload": workload_, "peer": peer, "size": size, "median_s": times[0], **extra}
        )
        return records[-1]

    run_startup(args.turns, args.runs, add, lambda m: print("note:", m), against=args.against)
    name, value, ok = target(records)
    print(f"[{'PASS' if ok else 'MISS'}] {name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
