"""The context-engine service: its calls through a client, beside the same calls in-process.

Builds one OpenClaw-like session of N committed turns (user + assistant, every 5th with
a 4 KB tool result) and compacts it once, as a long session would be, then times, per
call: ``commitTurn`` (a new turn under a new advancement key), ``assemble`` (the
compacted context) and a no-op ``ingest`` -- in-process (`EngineCalls`, no HTTP), through
the OpenClaw plugin's own JavaScript client (Node; what OpenClaw pays; skipped without
Node), and through the Python `ServiceClient` (httpx) over the Unix socket and over TCP,
all against one running ``nexus-store serve``. Prints p50 and p99 and the ratio to
in-process.

    python benchmarks/bench_service.py --turns 10000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nexus_store import Store
from nexus_store.service.client import ServiceClient
from nexus_store.service.lifecycle import EngineCalls
from nexus_store.service.runner import ensure_running

KEY = "agent:main:bench"
TARGET_P50_MS = 5.0


def turn_messages(i: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"question {i}: please look at module {i % 97}", "timestamp": i}
    ]
    if i % 5 == 0:
        messages += [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "toolCall",
                        "id": f"c{i}",
                        "name": "read",
                        "arguments": {"path": f"m{i}.py"},
                    }
                ],
                "timestamp": i,
            },
            {
                "role": "toolResult",
                "toolCallId": f"c{i}",
                "toolName": "read",
                "content": [{"type": "text", "text": "x = 1\n" * 680}],
                "isError": False,
                "timestamp": i,
            },
        ]
    messages.append(
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}], "timestamp": i}
    )
    return messages


def build(db: Path, turns: int) -> None:
    with Store(db, counter="chars4") as store:
        calls = EngineCalls(store)
        with store.atomic():
            for i in range(turns):
                calls.commit_turn(
                    {
                        "advancementKey": f"build-{i}",
                        "sessionKey": KEY,
                        "messages": turn_messages(i),
                    }
                )
        calls.compact({"sessionKey": KEY, "force": True, "options": {"keepRecentTokens": 8000}})


def service_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) the service process has used; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], float]:
    """Wall seconds of each call, and the CPU seconds of this process per call."""
    fn()
    out = []
    cpu = time.process_time()
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out, (time.process_time() - cpu) / reps


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def operations(
    call: Callable[[str, dict[str, Any]], Any], tag: str
) -> dict[str, Callable[[], Any]]:
    counter = iter(range(10**9))

    def commit() -> Any:
        n = next(counter)
        return call(
            "commitTurn",
            {
                "advancementKey": f"{tag}-{n}",
                "sessionKey": KEY,
                "messages": turn_messages(n * 5 + 1),
            },
        )

    return {
        "commitTurn": commit,
        "assemble": lambda: call("assemble", {"sessionKey": KEY, "tokenBudget": 100_000}),
        "ingest (no-op)": lambda: call(
            "ingest", {"sessionKey": KEY, "message": {"role": "user", "content": "x"}}
        ),
    }


NODE_DRIVER = """
import { ServiceClient } from %(index)s;
const [db, reps, wanted] = [%(db)s, %(reps)d, %(ops)s];
const client = new ServiceClient({ db });
const key = "agent:main:bench";
const message = (n) => [
  { role: "user", content: `question ${n}`, timestamp: n },
  { role: "assistant", content: [{ type: "text", text: `answer ${n}` }], timestamp: n },
];
let n = 0;
const ops = {
  commitTurn: () => client.call("commitTurn", { advancementKey: `node-${n++}`, sessionKey: key, messages: message(n) }),
  assemble: () => client.call("assemble", { sessionKey: key, tokenBudget: 100000 }),
  "ingest (no-op)": () => client.call("ingest", { sessionKey: key, message: { role: "user", content: "x" } }),
};
const out = {};
for (const [name, op] of Object.entries(ops)) {
  if (!wanted.includes(name)) continue;
  for (let i = 0; i < 20; i++) await op(); // warm the JIT and the connection
  const times = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < reps; i++) {
    const t0 = process.hrtime.bigint();
    await op();
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const used = process.cpuUsage(cpu);
  out[name] = { times, cpu: (used.user + used.system) / 1e6 / reps };
}
console.log(JSON.stringify(out));
"""


def node_binary() -> str | None:
    """Node for the plugin's own client (NEXUS_TEST_NODE, else node on PATH)."""
    return os.environ.get("NEXUS_TEST_NODE") or shutil.which("node")


def through_plugin(node: str, db: Path, reps: int, ops: list[str]) -> dict[str, dict[str, Any]]:
    """Times of each operation through the OpenClaw plugin's JavaScript client, and
    Node's CPU seconds per call (``{"times": [...], "cpu": s}``)."""
    from nexus_store.integrations import openclaw_plugin_dir

    index = (openclaw_plugin_dir() / "index.js").as_uri()
    script = db.with_name("drive.mjs")
    values = {"index": json.dumps(index), "db": json.dumps(str(db)), "reps": reps}
    script.write_text(NODE_DRIVER % {**values, "ops": json.dumps(ops)})
    done = subprocess.run(
        [node, str(script)], capture_output=True, text=True, timeout=1800, check=True
    )
    result: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return result


def run(turns: int, reps: int = 200) -> list[dict[str, Any]]:
    """Measure every operation in every mode; records with p50/p99 in seconds.

    Reads first, in every mode, then commits (each adds a turn): so every mode's
    ``assemble`` sees the same compacted session.
    """
    records: list[dict[str, Any]] = []
    methods = {
        "commitTurn": EngineCalls.commit_turn,
        "assemble": EngineCalls.assemble,
        "ingest": EngineCalls.ingest,
    }
    node = node_binary()
    with tempfile.TemporaryDirectory(prefix="nexus-bench-service-") as tmp:
        db = Path(tmp) / "bench.db"
        build(db, turns)
        info = ensure_running(db, timeout=120)
        try:
            for phase in (["assemble", "ingest (no-op)"], ["commitTurn"]):
                with Store(db) as store:
                    calls = EngineCalls(store)
                    ops = operations(lambda m, p, c=calls: methods[m](c, p), f"inproc-{phase[0]}")
                    for op in phase:
                        times, cpu = timed(ops[op], reps)
                        records.append(_record(op, "in-process", turns, times, cpu))
                if node:
                    for op in phase:  # one op per run: the service's CPU is per op
                        before = service_cpu(info.pid)
                        got = through_plugin(node, db, reps, [op])[op]
                        after = service_cpu(info.pid)
                        served = None if before is None or after is None else after - before
                        records.append(
                            _record(
                                op,
                                "plugin client (Node)",
                                turns,
                                got["times"],
                                got["cpu"],
                                None if served is None else served / (reps + 20),
                            )
                        )
                for mode, unix in (
                    ("Python client, Unix socket", True),
                    ("Python client, TCP", False),
                ):
                    if unix and not info.socket:
                        continue
                    with ServiceClient(db, unix_socket=unix) as client:
                        ops = operations(client.call, mode.split()[-1])
                        for op in phase:
                            before = service_cpu(info.pid)
                            times, cpu = timed(ops[op], reps)
                            after = service_cpu(info.pid)
                            served = None if before is None or after is None else after - before
                            records.append(
                                _record(
                                    op,
                                    mode,
                                    turns,
                                    times,
                                    cpu,
                                    None if served is None else served / (reps + 1),
                                )
                            )
        finally:
            os.kill(info.pid, signal.SIGTERM)
    order = ["commitTurn", "assemble", "ingest (no-op)"]
    modes = [
        "in-process",
        "plugin client (Node)",
        "Python client, Unix socket",
        "Python client, TCP",
    ]
    records.sort(
        key=lambda r: (modes.index(r["peer"]), order.index(r["workload"].removeprefix("service-")))
    )
    return records


def _record(
    op: str,
    mode: str,
    turns: int,
    times: list[float],
    client_cpu: float,
    service_cpu: float | None = None,
) -> dict[str, Any]:
    return {
        "workload": f"service-{op}",
        "peer": mode,
        "size": turns,
        "median_s": statistics.median(times),
        "p99_s": pct(times, 99),
        "n": len(times),
        # CPU seconds per call: the caller's process, and the service's (None in-process)
        "client_cpu_s": client_cpu,
        "service_cpu_s": service_cpu,
    }


def render(records: list[dict[str, Any]]) -> list[str]:
    """The table: p50/p99 per operation and mode, and the ratio to in-process."""
    if not records:
        return []
    turns = records[0]["size"]
    out = [
        f"context-engine service: calls on a session of {turns:,} turns (compacted once), "
        f"target p50 <= {TARGET_P50_MS:g} ms for commit and assemble",
        "-" * 100,
        f"  {'operation':16s} {'mode':26s} {'p50 ms':>9s} {'p99 ms':>9s} {'x in-process':>13s}"
        f" {'CPU ms':>7s} {'svc CPU':>8s}  target",
    ]
    base = {r["workload"]: r["median_s"] for r in records if r["peer"] == "in-process"}
    for r in records:
        op = r["workload"].removeprefix("service-")
        ratio = r["median_s"] / base[r["workload"]] if base.get(r["workload"]) else float("nan")
        p50 = r["median_s"] * 1000
        target = ""
        if r["peer"] != "in-process" and op in ("commitTurn", "assemble"):
            target = "ok" if p50 <= TARGET_P50_MS else "MISSED"
        cpu = r.get("client_cpu_s")
        svc = r.get("service_cpu_s")
        cpu_text = "-" if cpu is None else f"{cpu * 1000:.2f}"
        svc_text = "-" if svc is None else f"{svc * 1000:.2f}"
        out.append(
            f"  {op:16s} {r['peer']:26s} {p50:9.2f} {r['p99_s'] * 1000:9.2f} {ratio:13.1f}"
            f" {cpu_text:>7s} {svc_text:>8s}  {target}"
        )
    out.append(
        "  CPU ms: the caller's CPU per call (Node's for the plugin client); svc CPU: the "
        "service process's. Wall times move with the machine's load, CPU times much less."
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=300)
    args = ap.parse_args()
    print("\n".join(render(run(args.turns, args.reps))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
