// nexus_store as an OpenClaw context engine (plain ESM, no build step, no dependencies).
//
// OpenClaw builds a new engine for every logical turn, so this plugin holds no state:
// every call goes to one long-lived `nexus-store serve` per database, which it starts
// when none answers. The service keeps the session-key mapping and the committed
// advancement keys in the database. When the service cannot be reached or answers an
// error, the call fails with one clear message and nothing is lost: OpenClaw keeps its
// own transcript and retries the turn commit from its outbox.

import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { appendFileSync, closeSync, mkdirSync, openSync, readFileSync, realpathSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

export const ENGINE_ID = "nexus-store";
const VERSION = "0.1.0";
const STORE_FILE = "openclaw-agent.sqlite";
const CONNECTION_ERRORS = new Set(["ECONNREFUSED", "ENOENT", "ECONNRESET", "EPIPE", "ENOTSOCK"]);

function expandHome(p) {
  return p.startsWith("~/") ? path.join(os.homedir(), p.slice(2)) : p;
}

/** The database nexus-store uses by default ($NEXUS_STORE_DB, else the XDG data dir). */
export function defaultDatabase() {
  if (process.env.NEXUS_STORE_DB) return process.env.NEXUS_STORE_DB;
  const base = process.env.XDG_DATA_HOME || path.join(os.homedir(), ".local", "share");
  return path.join(base, "nexus_store", "sessions.db");
}

const POSTGRES_URL = /^postgres(?:ql)?:\/\//i;

/** A PostgreSQL URL without its password (as nexus_store.store.pg.redact writes it). */
export function redact(url) {
  return url.replace(/(:\/\/[^:/@]*):[^@/]*@/, "$1:***@");
}

/**
 * Where the service's files (token, lock, state, socket, log) live: beside a database
 * file, or for a PostgreSQL URL in $XDG_STATE_HOME/nexus_store/services/<key>/db.*, the
 * key the first 16 hex digits of the SHA-256 of the URL without its password (as
 * nexus_store.service.runner.state_dir computes it).
 */
export function serviceBase(db) {
  if (!POSTGRES_URL.test(db)) return db;
  const state = process.env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state");
  const key = createHash("sha256").update(redact(db)).digest("hex").slice(0, 16);
  return path.join(state, "nexus_store", "services", key, "db");
}

/** An error of one engine call, with the method and the database named. */
export class NexusStoreError extends Error {
  constructor(message, { status, cause } = {}) {
    super(message, cause ? { cause } : undefined);
    this.name = "NexusStoreError";
    this.status = status;
  }
}

/** Calls to the nexus-store service of one database, starting it when none answers. */
export class ServiceClient {
  constructor(options = {}, logger = undefined) {
    const db = options.db || defaultDatabase();
    this.db = POSTGRES_URL.test(db) ? db : path.resolve(expandHome(db));
    this.label = POSTGRES_URL.test(db) ? redact(db) : this.db;
    const base = serviceBase(this.db);
    this.command = Array.isArray(options.command) && options.command.length ? options.command : ["nexus-store"];
    this.startTimeoutMs = options.startTimeoutMs ?? 60000;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 120000;
    this.debugLog = options.debugLog || process.env.NEXUS_STORE_PLUGIN_DEBUG || "";
    this.logger = logger;
    this.stateFile = `${base}.service.json`;
    this.tokenFile = `${base}.token`;
    this.logFile = `${base}.service.log`;
    this.starting = undefined;
    // Where the service listens and its token, read once and read again only when a
    // call cannot connect (a new service) or is refused (a new token): two file reads
    // per call were a third of the client's time.
    this.state = undefined;
    this.token = undefined;
    // Kept-alive connections on an agent of our own (whatever OpenClaw does to Node's
    // global agent, e.g. a proxy, never applies to the loopback service). An idle socket
    // does not keep the process alive and is closed after 20 s, before the service's
    // 30 s keep-alive ends, so a call never lands on a socket the service is closing.
    this.agent = new http.Agent({ keepAlive: true, timeout: 20000, maxSockets: 8, maxFreeSockets: 2 });
  }

  debug(record) {
    if (!this.debugLog) return;
    try {
      appendFileSync(this.debugLog, `${JSON.stringify({ t: Date.now(), pid: process.pid, ...record })}\n`);
    } catch {
      // debugging must never break a call
    }
  }

  readState() {
    try {
      return JSON.parse(readFileSync(this.stateFile, "utf8"));
    } catch {
      return undefined;
    }
  }

  readToken() {
    this.token ??= readFileSync(this.tokenFile, "utf8").trim();
    return this.token;
  }

  /** One HTTP request to the service; rejects with err.code set for connection failures. */
  request(state, method, body, httpMethod = "POST") {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const target = state.socket ? { socketPath: state.socket } : (() => {
      const url = new URL(state.url);
      return { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port) };
    })();
    let token;
    try {
      token = this.readToken();
    } catch (err) {
      return Promise.reject(Object.assign(new Error(`cannot read the token file ${this.tokenFile}: ${err.message}`), { code: "ENOENT" }));
    }
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          ...target,
          method: httpMethod,
          agent: this.agent,
          path: `/v1/${method}`,
          headers: {
            Authorization: `Bearer ${token}`,
            ...(payload ? { "Content-Type": "application/json", "Content-Length": payload.length } : {}),
          },
          timeout: this.requestTimeoutMs,
        },
        (res) => {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            let value;
            try {
              value = text ? JSON.parse(text) : {};
            } catch {
              value = { error: text.slice(0, 200) };
            }
            if (res.statusCode !== 200) {
              reject(new NexusStoreError(`${value.error ?? `HTTP ${res.statusCode}`} (HTTP ${res.statusCode})`, { status: res.statusCode }));
            } else {
              resolve(value);
            }
          });
        },
      );
      req.on("timeout", () => req.destroy(Object.assign(new Error(`no answer in ${this.requestTimeoutMs} ms`), { code: "ETIMEDOUT" })));
      req.on("error", reject);
      if (payload) req.write(payload);
      req.end();
    });
  }

  async healthy(state) {
    try {
      const health = await this.request(state, "health", undefined, "GET");
      if (this.label !== this.db) return health.service === "nexus_store" && health.database === this.label;
      return health.service === "nexus_store" && samePath(health.database, this.db);
    } catch {
      return false;
    }
  }

  /** Start `nexus-store --db DB serve` in the background and wait until it answers. */
  start() {
    this.starting ??= this.startOnce().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  async startOnce() {
    const existing = this.readState();
    if (existing && (await this.healthy(existing))) return existing;
    mkdirSync(path.dirname(serviceBase(this.db)), { recursive: true, mode: 0o700 });
    const [program, ...args] = this.command;
    const out = openSync(this.logFile, "a", 0o600);
    let spawnError;
    let exitCode;
    try {
      const child = spawn(program, [...args, "--db", this.db, "serve"], {
        detached: true,
        stdio: ["ignore", out, out],
      });
      child.on("error", (err) => {
        spawnError = err;
      });
      // 0: another service won the lock and answers soon; anything else: it failed
      child.on("exit", (code, signal) => {
        exitCode = code ?? signal;
      });
      child.unref();
    } finally {
      closeSync(out);
    }
    this.debug({ event: "start", command: this.command });
    const deadline = Date.now() + this.startTimeoutMs;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      if (spawnError) {
        throw new NexusStoreError(`cannot run ${JSON.stringify(program)}: ${spawnError.message}; set the plugin's "command" (nexus-store openclaw install writes it)`);
      }
      if (exitCode !== undefined && exitCode !== 0) {
        throw new NexusStoreError(`the service exited (${exitCode}) before answering; see ${this.logFile}`);
      }
      const state = this.readState();
      if (state && (await this.healthy(state))) return state;
    }
    throw new NexusStoreError(`the service did not start in ${this.startTimeoutMs} ms (see ${this.logFile})`);
  }

  /** Call a service method; start the service when none answers (once per call). */
  async call(method, body) {
    const started = Date.now();
    try {
      this.state ??= this.readState() ?? (await this.start());
      let result;
      try {
        result = await this.request(this.state, method, body);
      } catch (err) {
        if (err?.status === 401 && this.token !== undefined) {
          this.token = undefined; // the token file was made again: read it once more
        } else if (CONNECTION_ERRORS.has(err?.code)) {
          this.state = this.token = undefined; // a new service, maybe a new address
          this.state = await this.start();
        } else {
          throw err;
        }
        result = await this.request(this.state, method, body);
      }
      this.debug({ method, ms: Date.now() - started, keys: Object.keys(body ?? {}), result: summarize(result) });
      return result;
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      const kept = method === "commitTurn"
        ? "Nothing was lost: the turn stays in OpenClaw's outbox and is committed again on the next turn."
        : "Nothing was lost: OpenClaw's own transcript is unchanged.";
      const message = `nexus_store ${method} failed: ${detail} (database ${this.label}; service log ${this.logFile}). ${kept}`;
      this.debug({ method, error: message });
      this.logger?.warn?.(message);
      throw new NexusStoreError(message, { status: err?.status, cause: err });
    }
  }
}

function samePath(a, b) {
  // the service reports its database with symlinks resolved (/tmp -> /private/tmp on macOS)
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return a === b;
  }
}

function summarize(result) {
  if (!result || typeof result !== "object") return result;
  const out = {};
  for (const [k, v] of Object.entries(result)) out[k] = Array.isArray(v) ? `[${v.length}]` : typeof v === "string" && v.length > 80 ? `${v.slice(0, 80)}...` : v;
  return out;
}

/**
 * OpenClaw's own transcript store of the session's agent (openclaw-agent.sqlite), which
 * the service reads (read-only) to import a session's earlier history and the turns
 * OpenClaw ran on its legacy engine: the agent folder OpenClaw gives the engine factory,
 * else the store a commit's anchors name, else the default state folder.
 */
export function hostStore(ctx = {}, params = {}) {
  if (typeof ctx.agentDir === "string" && ctx.agentDir) return path.join(ctx.agentDir, STORE_FILE);
  for (const where of [params.admission, params.terminal, params.sessionTarget]) {
    const p = where?.storePath;
    if (typeof p === "string" && p.endsWith(`${path.sep}${STORE_FILE}`)) return p;
  }
  const agentDir = params.runtimeContext?.agentDir;
  if (typeof agentDir === "string" && agentDir) return path.join(agentDir, STORE_FILE);
  const key = (params.sessionKey ?? "").split(":");
  const agent = key.length > 2 && key[0] === "agent" && key[1] ? key[1] : "main";
  const state = expandHome(process.env.OPENCLAW_STATE_DIR || path.join(os.homedir(), ".openclaw"));
  return path.join(state, "agents", agent, "agent", STORE_FILE);
}

function anchor(a) {
  if (!a || typeof a !== "object") return undefined;
  return { entryId: a.entryId, sessionId: a.sessionId, rawSeq: a.rawSeq, logicalTurnId: a.logicalTurnId };
}

/** The engine OpenClaw's factory returns: every ContextEngine method of 2026.9.6. */
export function createEngine(client, config = {}, ctx = {}) {
  const options = {};
  for (const name of ["keepRecentTokens", "contextWindow", "summarizer", "systemPromptAddition"]) {
    if (config[name] !== undefined) options[name] = config[name];
  }
  const base = (params) => ({
    sessionId: params.sessionId,
    sessionKey: params.sessionKey,
    workspaceDir: ctx.workspaceDir,
    cwd: params.runtimeContext?.cwd,
    openclawStore: hostStore(ctx, params),
    options,
  });
  return {
    info: {
      id: ENGINE_ID,
      name: "nexus_store",
      version: VERSION,
      ownsCompaction: true,
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
    },

    async bootstrap(params) {
      return client.call("bootstrap", base(params));
    },

    async maintain(params) {
      // OpenClaw runs maintenance after each committed turn (instead of afterTurn on the
      // durable-commit path): nexus_store's proactive compaction runs here. OpenClaw's own
      // transcript is never rewritten; compaction adds summary turns in nexus_store.
      const budget = params.runtimeContext?.tokenBudget;
      if (budget) await client.call("afterTurn", { ...base(params), tokenBudget: budget });
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "nexus_store does not rewrite OpenClaw's transcript" };
    },

    async ingest(params) {
      return client.call("ingest", { ...base(params), message: params.message, isHeartbeat: params.isHeartbeat });
    },

    async ingestBatch(params) {
      return client.call("ingestBatch", { ...base(params), messages: params.messages, isHeartbeat: params.isHeartbeat });
    },

    async commitTurn(params) {
      const result = await client.call("commitTurn", {
        ...base(params),
        advancementKey: params.advancementKey,
        admission: anchor(params.admission),
        terminal: anchor(params.terminal),
        messages: params.messages,
        isHeartbeat: params.isHeartbeat,
      });
      return { status: result.status };
    },

    async afterTurn(params) {
      await client.call("afterTurn", { ...base(params), tokenBudget: params.tokenBudget, isHeartbeat: params.isHeartbeat });
    },

    async assemble(params) {
      const request = { ...base(params), tokenBudget: params.tokenBudget, prompt: params.prompt };
      let result = await client.call("assemble", request);
      if (result.needsHistory) {
        // a session nexus_store has not seen: its OpenClaw history is imported once
        result = await client.call("assemble", { ...request, messages: params.messages ?? [] });
      }
      return {
        messages: result.messages,
        estimatedTokens: result.estimatedTokens,
        ...(result.systemPromptAddition ? { systemPromptAddition: result.systemPromptAddition } : {}),
      };
    },

    async compact(params) {
      return client.call("compact", {
        ...base(params),
        force: params.force,
        tokenBudget: params.tokenBudget,
        currentTokenCount: params.currentTokenCount,
        customInstructions: params.customInstructions,
      });
    },

    async prepareSubagentSpawn(params) {
      const prepared = await client.call("prepareSubagentSpawn", {
        parentSessionKey: params.parentSessionKey,
        childSessionKey: params.childSessionKey,
        contextMode: params.contextMode,
        parentSessionId: params.parentSessionId,
        childSessionId: params.childSessionId,
      });
      return {
        rollback: async () => {
          if (prepared.created) await client.call("rollbackSubagentSpawn", { childSessionKey: params.childSessionKey });
        },
      };
    },

    async onSubagentEnded(params) {
      await client.call("onSubagentEnded", { childSessionKey: params.childSessionKey, reason: params.reason });
    },

    async dispose() {
      // Nothing is held between calls but one idle connection, which never keeps
      // OpenClaw's process alive and is closed after 20 s.
    },
  };
}

export default {
  id: ENGINE_ID,
  name: "nexus_store",
  description: "Sessions as a tree of turns in a nexus_store database, served by `nexus-store serve`.",
  register(api) {
    const config = api.pluginConfig ?? {};
    const client = new ServiceClient(config, api.logger);
    api.registerContextEngine(ENGINE_ID, (ctx) => createEngine(client, config, ctx ?? {}));
  },
};
