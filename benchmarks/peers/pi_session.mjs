// Drive pi-coding-agent's own SessionManager (public class, exported by the package)
// for benchmarks/peers/pi_node.py. One JSON request on argv[2], one JSON answer on stdout.
// Requests:
//   {"cmd":"append","dir":D,"entries":F}     SessionManager.create + one append per entry, timed each
//   {"cmd":"context","file":F,"reps":N}      SessionManager.open(F) + buildSessionContext(), timed each
//                                            (cold: re-reads and re-parses the file as a resumed
//                                            agent does), then N warm buildSessionContext() calls
//   {"cmd":"branches","file":F,"leaves":[..]} open once; per leaf: branch(id) + buildSessionContext()
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const root = process.env.PI_PACKAGE_DIR;
const { SessionManager } = await import(
  pathToFileURL(`${root}/dist/core/session-manager.js`).href
);
const req = JSON.parse(process.argv[2]);
const now = () => Number(process.hrtime.bigint()) / 1e9;
const out = {};

if (req.cmd === "append") {
  const sm = SessionManager.create("/repo", req.dir);
  const lines = readFileSync(req.entries, "utf8").trim().split("\n");
  const entries = lines.map((l) => JSON.parse(l));
  const lat = [];
  for (const e of entries) {
    const t0 = now();
    if (e.type === "compaction") {
      sm.appendCompaction(e.summary, sm.getLeafId(), e.tokensBefore);
    } else {
      sm.appendMessage(e.message);
    }
    lat.push(now() - t0);
  }
  out.lat = lat;
  out.file = sm.getSessionFile();
} else if (req.cmd === "context") {
  const cold = [];
  let sm;
  let n = 0;
  for (let i = 0; i < req.reps; i++) {
    const t0 = now();
    sm = SessionManager.open(req.file);
    n = sm.buildSessionContext().messages.length;
    cold.push(now() - t0);
  }
  const warm = [];
  for (let i = 0; i < req.reps; i++) {
    const t0 = now();
    n = sm.buildSessionContext().messages.length;
    warm.push(now() - t0);
  }
  Object.assign(out, { cold, warm, n });
} else if (req.cmd === "branches") {
  const sm = SessionManager.open(req.file);
  const lat = [];
  const ns = [];
  for (const id of req.leaves) {
    const t0 = now();
    sm.branch(id);
    ns.push(sm.buildSessionContext().messages.length);
    lat.push(now() - t0);
  }
  Object.assign(out, { lat, ns });
}
process.stdout.write(JSON.stringify(out));
