import type { ChildProcess } from "node:child_process";
import os from "node:os";
import { readSetting } from "../config/settings.ts";
import { createLogger, type Logger } from "../log/logger.ts";

/**
 * `wharf up` is a small supervisor: the platform runs in a child process that it starts again when
 * a fault ends it (`fault-policy.ts`), so one crash does not take every tenant down for good. The
 * child's own restart logic does the rest: sandboxes are re-adopted, the deployments' servers
 * (which die with the process that ran them) are served again, interrupted runs resume.
 *
 * The supervisor loads none of the platform. Signals are forwarded to the child (which runs in its
 * own process group, so a terminal's Ctrl-C reaches it once, through here). If the supervisor itself
 * is killed, the child ends at once too (it watches the IPC channel): `kill -9` of `wharf up` still
 * means the platform is gone, as it did before there was a supervisor.
 */

/** Messages from the platform child. */
export type ChildMessage = { type: "ready" };

export type ExitDecision = { action: "exit"; code: number } | { action: "restart"; delayMs: number };

/** `wharf up`'s exit code when the platform could not start: not restarted (a configuration or storage problem). */
export const CANNOT_START_EXIT_CODE = 1;
const BAD_CONFIGURATION_EXIT_CODE = 2;
const WINDOW_MS = 60_000;

/**
 * What to do when the platform child exits. A graceful stop (asked by a signal) or a start-up
 * failure ends `wharf up` with the child's code; anything else (a fault, a signal from elsewhere,
 * the OOM killer) restarts it, after a delay that doubles with each recent restart (0.25 s up to 30 s).
 */
export function onChildExit(e: {
  code: number | null;
  signal: string | null;
  stopping: boolean;
  wasReady: boolean;
  recentRestarts: number;
}): ExitDecision {
  const code = e.code ?? 128 + (e.signal ? (os.constants.signals[e.signal as NodeJS.Signals] ?? 1) : 1);
  if (e.stopping) return { action: "exit", code };
  if (!e.wasReady && (e.code === CANNOT_START_EXIT_CODE || e.code === BAD_CONFIGURATION_EXIT_CODE))
    return { action: "exit", code };
  return { action: "restart", delayMs: Math.min(30_000, 250 * 2 ** Math.min(e.recentRestarts, 7)) };
}

/** Restarts within the last minute, oldest dropped. */
export function recentRestarts(times: number[], now: number): number[] {
  return times.filter((t) => now - t < WINDOW_MS);
}

/** A platform child as `bin/platform-child.js` forks and watches it (from before this module loaded). */
export interface PlatformChild {
  child: ChildProcess;
  /** It said it serves (`superviseFromChild().ready()`). */
  ready: boolean;
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  onExit: (() => void) | null;
}

export interface EarlySupervision {
  first: PlatformChild;
  fork(): PlatformChild;
  /** The signals that arrived before `supervise` took over (and stops recording them). */
  takeSignals(): NodeJS.Signals[];
}

function logLevel(): string {
  try {
    return readSetting("WHARF_LOG_LEVEL");
  } catch {
    return "info"; // the child names the bad setting and exits 2, which ends this process too
  }
}

/** Keeps the platform child running: restarts it after a fault, forwards signals, exits with it when it stops. */
export function supervise(early: EarlySupervision, log: Logger = createLogger({ level: logLevel() })): void {
  let current: PlatformChild | null = null;
  let stopping = false;
  let restarts: number[] = [];
  let pendingStart: NodeJS.Timeout | null = null;

  const watch = (pc: PlatformChild) => {
    current = pc;
    pc.onExit = () => {
      current = null;
      const { code, signal } = pc.exit!;
      restarts = recentRestarts(restarts, Date.now());
      const decision = onChildExit({ code, signal, stopping, wasReady: pc.ready, recentRestarts: restarts.length });
      if (decision.action === "exit") process.exit(decision.code);
      restarts.push(Date.now());
      log.error(
        { code, signal, pid: pc.child.pid, restartInMs: decision.delayMs, restartsInLastMinute: restarts.length },
        "the platform process ended unexpectedly; starting it again",
      );
      pendingStart = setTimeout(() => {
        pendingStart = null;
        watch(early.fork());
      }, decision.delayMs);
    };
    if (pc.exit) pc.onExit();
  };

  const forward = (signal: NodeJS.Signals) => {
    stopping = true;
    if (pendingStart) {
      clearTimeout(pendingStart);
      process.exit(0);
    }
    current?.child.kill(signal);
  };
  process.on("SIGTERM", () => forward("SIGTERM"));
  process.on("SIGINT", () => forward("SIGINT"));
  // A closed terminal: the child is in its own group and would not hear of it.
  process.on("SIGHUP", () => forward("SIGTERM"));
  const missed = early.takeSignals();
  watch(early.first);
  for (const s of missed) forward(s === "SIGHUP" ? "SIGTERM" : s);
}

/**
 * In the platform child: tells the supervisor when the platform serves, and ends this process at
 * once if the supervisor goes away (nothing would restart or stop it, and it would hold the port).
 */
export function superviseFromChild(): { ready(): void } {
  process.once("disconnect", () => process.kill(process.pid, "SIGKILL"));
  return { ready: () => process.send?.({ type: "ready" } satisfies ChildMessage) };
}
