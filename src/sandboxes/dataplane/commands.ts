import type { ExecProcess } from "../driver/driver.ts";
import { HeadBuffer, SpillBuffer, type OutputChunk } from "./output-buffer.ts";

export type CommandEvent =
  | { type: "stdout" | "stderr"; data: string; offset: number }
  | { type: "exit"; exit_code: number }
  | { type: "error"; error_type: string; error: string };

export interface CommandOptions {
  timeoutSeconds: number;
  /** Kill the command when no client has been attached for this long (-1: never). */
  idleTimeoutSeconds: number;
  /** Keep the finished command (for reconnects) this long. */
  ttlSeconds: number;
  killOnDisconnect: boolean;
  maxOutputBytes: number;
  /**
   * `head`: keep the first maxOutputBytes for one HTTP response (the rest is drained, `truncated`);
   * `spill`: write the stream to files under this folder for reconnects (nothing kept in memory).
   */
  output: { kind: "head" } | { kind: "spill"; dir: string };
}

/**
 * A command running (or recently finished) in a sandbox: its output with offsets, its exit code
 * and whoever is listening. Lives in the platform's memory: a reconnecting client gets everything
 * from its offsets on; a platform restart ends running commands (the sandbox itself survives).
 */
export class CommandSession {
  readonly stdout: HeadBuffer | SpillBuffer;
  readonly stderr: HeadBuffer | SpillBuffer;
  exitCode: number | null = null;
  timedOut = false;
  pid = 0;
  private listeners = new Set<(e: CommandEvent) => void>();
  private timers: NodeJS.Timeout[] = [];
  private idleTimer: NodeJS.Timeout | null = null;
  readonly done: Promise<number>;
  finishedAt = 0;

  constructor(
    readonly id: string,
    readonly sandboxId: string,
    readonly proc: ExecProcess,
    readonly opts: CommandOptions,
  ) {
    const out = opts.output;
    this.stdout =
      out.kind === "head"
        ? new HeadBuffer(opts.maxOutputBytes)
        : new SpillBuffer(opts.maxOutputBytes, out.dir, `${id}.stdout`);
    this.stderr =
      out.kind === "head"
        ? new HeadBuffer(opts.maxOutputBytes)
        : new SpillBuffer(opts.maxOutputBytes, out.dir, `${id}.stderr`);
    const emitChunk = (type: "stdout" | "stderr", c: OutputChunk | null) => c && this.emit({ type, ...c });
    proc.stdout.on("data", (b: Buffer) => emitChunk("stdout", this.stdout.append(b)));
    proc.stderr.on("data", (b: Buffer) => emitChunk("stderr", this.stderr.append(b)));
    proc.stdin.on("error", () => {
      // EPIPE once the command exited without reading its input: its exit code tells what happened.
    });
    const closed = (s: NodeJS.ReadableStream) =>
      new Promise<void>((r) => (s.on("end", () => r()), s.on("close", () => r()), s.on("error", () => r())));
    const streamsClosed = Promise.all([closed(proc.stdout), closed(proc.stderr)]);
    if (opts.timeoutSeconds > 0) {
      this.timers.push(
        setTimeout(() => {
          this.timedOut = true;
          proc.kill();
        }, opts.timeoutSeconds * 1000),
      );
    }
    this.done = proc.exited.then(async (code) => {
      // Background children may hold the pipes open: wait briefly for the rest of the output only.
      await Promise.race([streamsClosed, new Promise((r) => setTimeout(r, 200))]);
      emitChunk("stdout", this.stdout.end());
      emitChunk("stderr", this.stderr.end());
      this.exitCode = code;
      this.finishedAt = Date.now();
      for (const t of this.timers) clearTimeout(t);
      if (this.idleTimer) clearTimeout(this.idleTimer);
      if (this.timedOut)
        this.emit({
          type: "error",
          error_type: "CommandTimeout",
          error: `Command timed out after ${opts.timeoutSeconds} seconds`,
        });
      this.emit({ type: "exit", exit_code: code });
      return code;
    });
    this.armIdle();
  }

  get running(): boolean {
    return this.exitCode === null;
  }

  private emit(e: CommandEvent): void {
    for (const l of this.listeners) l(e);
  }

  /** Attaches a listener; replays output from the given offsets first. Returns the detach function. */
  attach(listener: (e: CommandEvent) => void, stdoutOffset = 0, stderrOffset = 0): () => void {
    if (this.stdout instanceof SpillBuffer)
      for (const c of this.stdout.since(stdoutOffset)) listener({ type: "stdout", ...c });
    if (this.stderr instanceof SpillBuffer)
      for (const c of this.stderr.since(stderrOffset)) listener({ type: "stderr", ...c });
    if (this.exitCode !== null) {
      if (this.timedOut)
        listener({
          type: "error",
          error_type: "CommandTimeout",
          error: `Command timed out after ${this.opts.timeoutSeconds} seconds`,
        });
      listener({ type: "exit", exit_code: this.exitCode });
      return () => {
        // Already finished: the listener was never registered, so there is nothing to detach.
      };
    }
    this.listeners.add(listener);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0 && this.running) {
        if (this.opts.killOnDisconnect) this.proc.kill();
        else this.armIdle();
      }
    };
  }

  private armIdle(): void {
    if (this.opts.idleTimeoutSeconds < 0 || this.listeners.size > 0 || !this.running) return;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.proc.kill(), this.opts.idleTimeoutSeconds * 1000);
    this.idleTimer.unref();
  }

  get attached(): number {
    return this.listeners.size;
  }

  kill(): void {
    this.proc.kill();
  }

  /** Removes what the session keeps on disk (after its ttl, or when the sandbox stops). */
  dispose(): void {
    if (this.stdout instanceof SpillBuffer) this.stdout.dispose();
    if (this.stderr instanceof SpillBuffer) this.stderr.dispose();
  }

  /** Whether the HTTP response had to leave output out. */
  get truncated(): boolean {
    return (
      (this.stdout instanceof HeadBuffer && this.stdout.truncated) ||
      (this.stderr instanceof HeadBuffer && this.stderr.truncated)
    );
  }
}

/** Commands of all sandboxes, by sandbox then command id; finished ones are kept for their ttl. */
export class CommandRegistry {
  private bySandbox = new Map<string, Map<string, CommandSession>>();

  add(session: CommandSession): void {
    let m = this.bySandbox.get(session.sandboxId);
    if (!m) this.bySandbox.set(session.sandboxId, (m = new Map()));
    m.set(session.id, session);
  }

  get(sandboxId: string, commandId: string): CommandSession | undefined {
    return this.bySandbox.get(sandboxId)?.get(commandId);
  }

  /** Running commands and attached streams: activity that keeps a sandbox from idling. */
  activity(sandboxId: string): number {
    let n = 0;
    for (const s of this.bySandbox.get(sandboxId)?.values() ?? []) if (s.running) n += 1 + s.attached;
    return n;
  }

  killAll(sandboxId: string): void {
    for (const s of this.bySandbox.get(sandboxId)?.values() ?? []) if (s.running) s.kill();
  }

  forget(sandboxId: string): void {
    this.killAll(sandboxId);
    for (const s of this.bySandbox.get(sandboxId)?.values() ?? []) void s.done.then(() => s.dispose());
    this.bySandbox.delete(sandboxId);
  }

  /** Ends the sandbox's commands but keeps their output files (a restart replays them). */
  abandon(sandboxId: string): void {
    this.killAll(sandboxId);
    this.bySandbox.delete(sandboxId);
  }

  purge(now = Date.now()): void {
    for (const [sid, m] of this.bySandbox) {
      for (const [cid, s] of m) {
        if (!s.running && now - s.finishedAt > s.opts.ttlSeconds * 1000) {
          s.dispose();
          m.delete(cid);
        }
      }
      if (m.size === 0) this.bySandbox.delete(sid);
    }
  }
}
