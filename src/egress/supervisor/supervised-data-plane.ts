import { fork, type ChildProcess } from "node:child_process";
import type net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "../../log/logger.ts";
import type { AuditSink } from "../audit/audit-log.ts";
import type { DataPlane, SandboxSpec } from "./data-plane.ts";
import type { ListenerRole } from "./dispatch.ts";
import type { FromDataPlane, ToDataPlane } from "./messages.ts";
import { restartDelay } from "./restart-policy.ts";
import type { EgressSource } from "../egress-settings.ts";
import { processEnvironment } from "../../config/index.ts";

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), "data-plane-child.ts");
/** tsx's loader by absolute URL, so the child resolves it whatever its working folder. */
const TSX = import.meta.resolve("tsx");
/**
 * A young generation of 2 MiB (V8's default is 16): the data plane's garbage is short-lived (per
 * request, per handshake), and a large young generation only shows as resident memory. Measured
 * with bench/egress-proxy.ts: 1,000 open intercepted connections cost 24 KiB each instead of 37,
 * keep-alive CPU per request unchanged within the noise.
 */
const CHILD_NODE_ARGS = ["--max-semi-space-size=2"];
/** Connections accepted while the data plane restarts wait here (beyond this, they are refused). */
const MAX_QUEUED = 1024;

interface Served {
  server: net.Server;
  role: ListenerRole;
  /**
   * This process's copy of the listening socket once it no longer accepts here (a descriptor that
   * came back from a child: same socket, not polled), handed to every serving child.
   */
  held: ListenHandle | null;
  /** A child is making that copy. */
  copying: ChildProcess | null;
}

/** Node's native TCP handle of a listening socket (what `net.Server#_handle` is, and what crosses IPC as `net.Native`). */
type ListenHandle = object & { close(): void };

interface Known {
  spec: SandboxSpec;
  names: Array<[string, string]>;
  listeners: Map<number, Served>;
}

/**
 * Runs the egress data plane in a child process and keeps it running. The control plane keeps
 * what the child needs to start over — every sandbox's compiled rules and sealed values, the names
 * its DNS stub handed out, a descriptor of every listening socket — and hands it to each new child.
 *
 * The serving child accepts on the listeners itself. The control plane keeps its copy of each
 * without polling it: a child sends the listening socket straight back (a second descriptor of the
 * same socket), the control plane closes the descriptor it accepted on, and from then on a new
 * connection costs no descriptor pass, IPC message or acknowledgement (they were about half the
 * CPU of a new intercepted TLS connection). Between two children, connections wait in the
 * kernel's accept queue (1024 per listener) and the next child accepts them: nothing is refused
 * during a restart, and a crash costs only the connections the dead child had accepted. Until a
 * child has taken a listener over (the first moments of a sandbox), the control plane accepts on
 * it and passes each connection unread as a descriptor, keeping its own copy until the child
 * acknowledges it (re-sent to the next child if it died first; up to 1024 wait while none serves).
 * Only one process accepts on a listener at any time: this one stops before the child starts (an
 * earlier design in which both accepted lost connections inside real namespaces). A second child
 * waits warm (a cold start takes about a second on a busy machine) and takes over the moment the
 * serving one dies.
 */
export class SupervisedDataPlane implements DataPlane {
  /** The child serving connections. */
  private child: ChildProcess | null = null;
  /** The warm standby, and whether it has said it is ready. */
  private spare: ChildProcess | null = null;
  private spareReady = false;
  private ready = false;
  private closed = false;
  private readonly sandboxes = new Map<string, Known>();
  private readonly selfEndpoints: Array<{ address: string; port: number }> = [];
  private queue: Array<{ msg: ToDataPlane & { t: "conn" }; socket: net.Socket }> = [];
  /** Connections sent to the serving child and not yet acknowledged: sent again if it dies first. */
  private unacked = new Map<number, { msg: ToDataPlane & { t: "conn" }; socket: net.Socket }>();
  private seq = 0;
  private crashes: number[] = [];
  private readyWaiters: Array<() => void> = [];
  /** Children started so far (the first one included); tests and the operator's log read it. */
  starts = 0;
  /** Times a child took over after the serving one died. */
  takeovers = 0;
  /** Connections this process accepted and passed on (only before a child accepts on the listener itself). */
  passed = 0;

  /** Listeners this process no longer accepts on (the serving child does). */
  get heldListeners(): number {
    let n = 0;
    for (const k of this.sandboxes.values()) for (const l of k.listeners.values()) if (l.held) n++;
    return n;
  }

  constructor(
    private readonly audit: AuditSink,
    private readonly log: Logger | null,
    /** The egress settings' source (`egressSourceFrom(ctx.config.settings)`), sent to each child over IPC first. */
    private readonly source: EgressSource,
    /** The child's process environment: handed through (PATH, NODE_OPTIONS); its settings come over IPC. */
    private readonly env: NodeJS.ProcessEnv = processEnvironment(),
    /** Extra Node options for each child (a benchmark's `--cpu-prof`, which NODE_OPTIONS refuses). */
    private readonly nodeArgs: string[] = [],
  ) {}

  /** Started with the first sandbox: a platform that runs none pays nothing. */
  private ensureStarted(): void {
    if (this.starts > 0 || this.closed) return;
    this.child = this.spawn();
    this.spare = this.spawn();
  }

  /** The serving child's pid. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  /** Resolves once a data-plane process is serving and has been handed everything. */
  whenReady(): Promise<void> {
    this.ensureStarted();
    return this.ready ? Promise.resolve() : new Promise((r) => this.readyWaiters.push(r));
  }

  private spawn(): ChildProcess {
    this.starts++;
    const child = fork(CHILD, [], {
      execArgv: [...CHILD_NODE_ARGS, ...this.nodeArgs, "--import", TSX],
      env: this.env,
      stdio: ["ignore", "inherit", "pipe", "ipc"],
    });
    // First on the channel (messages arrive in order): the child builds its data plane from it.
    child.send({ t: "settings", source: this.source } satisfies ToDataPlane);
    let stderr = "";
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (d: string) => (stderr = (stderr + d).slice(-4096)));
    child.on("message", (m: FromDataPlane, handle?: unknown) => {
      if (m.t === "ready") this.onChildReady(child);
      else if (m.t === "audit") for (const e of m.events) this.audit.record(e);
      else if (m.t === "ack") this.acked(m.seq);
      else if (m.t === "listener") this.held(m.id, m.port, handle as ListenHandle | undefined);
    });
    // An IPC write to a child that just died; its exit handler replaces it.
    child.on("error", (err) => this.log?.warn({ err }, "egress data plane channel error"));
    child.once("exit", (code, signal) => {
      if (this.closed) return;
      // Only the error's first line: a stack may quote request data, never worth a log line.
      const reason =
        stderr
          .split("\n")
          .find((l) => /Error|assert/i.test(l))
          ?.slice(0, 300) ?? null;
      this.log?.error({ code, signal, reason, serving: child === this.child }, "egress data plane exited");
      this.onChildExit(child);
    });
    return child;
  }

  private onChildReady(child: ChildProcess): void {
    if (child === this.child) return this.handOver(child);
    if (child !== this.spare) return;
    this.spareReady = true;
    if (!this.child) this.promote();
  }

  private onChildExit(child: ChildProcess): void {
    const now = Date.now();
    this.crashes = [...this.crashes.filter((t) => now - t < 60_000), now];
    if (child === this.spare) {
      this.spare = null;
      this.spareReady = false;
    }
    // A copy it was making is lost with it; the next serving child makes it again.
    for (const k of this.sandboxes.values())
      for (const l of k.listeners.values()) if (l.copying === child) l.copying = null;
    if (child === this.child) {
      this.child = null;
      this.ready = false;
      // Connections it never took are still whole here: the next child gets them.
      for (const u of this.unacked.values()) this.queue.push(u);
      this.unacked.clear();
      if (this.spare && this.spareReady) this.promote();
      // else: the spare takes over when it is ready (onChildReady).
    }
    if (!this.spare) this.startSpare();
  }

  private startSpare(): void {
    setTimeout(() => {
      if (this.closed || this.spare) return;
      this.spare = this.spawn();
      this.spareReady = false;
      // No serving child and no spare: the new one serves as soon as it is ready.
    }, restartDelay(this.crashes.length)).unref();
  }

  private promote(): void {
    this.child = this.spare;
    this.spare = null;
    this.spareReady = false;
    this.takeovers++;
    this.handOver(this.child!);
    this.startSpare();
  }

  /** Gives a child everything it serves: endpoints, sandboxes, names, listeners, waiting connections. */
  private handOver(child: ChildProcess): void {
    for (const e of this.selfEndpoints) this.post({ t: "self", ...e });
    for (const [id, k] of this.sandboxes) {
      this.post({ t: "sandbox", spec: k.spec });
      if (k.names.length) this.post({ t: "names", id, pairs: k.names });
      for (const [port, l] of k.listeners) this.delegate(id, port, l);
    }
    this.ready = child.connected;
    const queued = this.queue;
    this.queue = [];
    for (const q of queued) this.pass(q.msg, q.socket);
    for (const w of this.readyWaiters.splice(0)) w();
  }

  private post(msg: ToDataPlane, handle?: net.Server | net.Socket | ListenHandle): void {
    const child = this.child;
    if (!child?.connected) return;
    try {
      child.send(msg, handle as net.Socket | undefined, (err) => {
        // The child died mid-send: a socket is lost with it (a listener is sent again on restart).
        if (err && handle && "remoteAddress" in handle) handle.destroy();
      });
    } catch (err) {
      this.log?.warn({ err }, "egress data plane send failed");
    }
  }

  /**
   * A connection this process accepted on a sandbox's listener: to the serving child (this copy
   * stays open, unread, until the child acknowledges it), or queued for the next one.
   */
  private pass(msg: ToDataPlane & { t: "conn" }, socket: net.Socket): void {
    if (socket.destroyed) return;
    if (!this.ready || !this.child?.connected) {
      if (this.queue.length >= MAX_QUEUED) return void socket.destroy();
      this.queue.push({ msg, socket });
      return;
    }
    const seq = ++this.seq;
    const sent = { ...msg, seq };
    this.passed++;
    // Without its `server`, Node does not make the listener's close() wait on the child's count of
    // connections (a dead child never answers); this copy still counts until it is destroyed.
    (socket as net.Socket & { server: net.Server | null }).server = null;
    this.unacked.set(seq, { msg: sent, socket });
    try {
      this.child.send(sent, socket, { keepOpen: true });
    } catch {
      // The channel closed under us: the exit handler hands the connection to the next child.
    }
  }

  /** The child has its own descriptor now; closing ours neither resets nor ends the connection. */
  private acked(seq: number): void {
    const u = this.unacked.get(seq);
    if (!u) return;
    this.unacked.delete(seq);
    u.socket.destroy();
  }

  upsertSandbox(spec: SandboxSpec): void {
    this.ensureStarted();
    const k = this.sandboxes.get(spec.id);
    if (k) k.spec = spec;
    else this.sandboxes.set(spec.id, { spec, names: [], listeners: new Map() });
    if (this.ready) this.post({ t: "sandbox", spec });
  }

  removeSandbox(id: string, owner?: string): void {
    const k = this.sandboxes.get(id);
    if (!k || (owner && k.spec.owner !== owner)) return;
    this.sandboxes.delete(id);
    if (this.ready) this.post({ t: "remove", id });
  }

  addNames(id: string, pairs: Array<[string, string]>): void {
    const k = this.sandboxes.get(id);
    if (!k) return;
    k.names.push(...pairs);
    if (this.ready) this.post({ t: "names", id, pairs });
  }

  serveListener(id: string, port: number, server: net.Server, role: ListenerRole = { kind: "namespace" }): void {
    const k = this.sandboxes.get(id);
    if (!k) return;
    const served: Served = { server, role, held: null, copying: null };
    k.listeners.set(port, served);
    // Until a child accepts on it, connections accepted here are handed over unread (read here,
    // their first bytes would be lost).
    (server as net.Server & { pauseOnConnect: boolean }).pauseOnConnect = true;
    server.on("connection", (socket: net.Socket) => this.pass({ t: "conn", id, port, role, seq: 0 }, socket));
    server.on("error", () => {
      // The held copy of a listener is never accepted on here: errors on it change nothing.
    });
    if (this.ready) this.delegate(id, port, served);
  }

  /** Has the serving child accept on the listener: at once if this process already holds its copy, else once a copy is made. */
  private delegate(id: string, port: number, l: Served): void {
    if (l.held) return this.post({ t: "listen", id, port, role: l.role }, l.held);
    const handle = (l.server as net.Server & { _handle?: ListenHandle | null })._handle;
    if (l.copying || !handle || !this.child?.connected) return;
    l.copying = this.child;
    this.post({ t: "copy", id, port }, handle);
  }

  /** The copy a child made of a listener: this process keeps it, stops accepting, and the serving child starts. */
  private held(id: string, port: number, copy: ListenHandle | undefined): void {
    const l = this.sandboxes.get(id)?.listeners.get(port);
    const server = l?.server as (net.Server & { _handle?: ListenHandle | null }) | undefined;
    if (!l || !copy || !server?._handle || l.held) return void copy?.close();
    l.copying = null;
    l.held = copy;
    // The server object stays the caller's (it closes it at detach), now on the copy: this
    // process no longer accepts, and closing the server closes the copy.
    const polled = server._handle;
    server._handle = copy;
    polled.close();
    if (this.ready) this.post({ t: "listen", id, port, role: l.role }, copy);
  }

  closeListener(id: string, port: number): void {
    const k = this.sandboxes.get(id);
    if (!k?.listeners.delete(port)) return;
    if (this.ready) this.post({ t: "unlisten", id, port });
  }

  addSelfEndpoint(address: string, port: number): void {
    this.selfEndpoints.push({ address, port });
    if (this.ready) this.post({ t: "self", address, port });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const q of [...this.queue, ...this.unacked.values()]) q.socket.destroy();
    this.queue = [];
    this.unacked.clear();
    const children = [this.child, this.spare];
    this.child = this.spare = null;
    this.ready = false;
    await Promise.all(children.map((c) => (c ? stop(c) : null)));
  }
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const t = setTimeout(() => child.kill("SIGKILL"), 2_000);
    child.once("exit", () => (clearTimeout(t), resolve()));
    child.kill("SIGTERM");
  });
}
