import { Readable } from "node:stream";
import { newId } from "../../store/ids.ts";
import { CommandSession } from "../dataplane/commands.ts";
import { SANDBOX_USER } from "../../confinement/index.ts";
import type { SandboxRow } from "../store/sandbox-store.ts";
import { dataplaneError } from "../dataplane/dataplane-error.ts";
import type { CommandOptions } from "../dataplane/commands.ts";
import type { SandboxManager } from "./manager.ts";

export interface ExecParams {
  command: string;
  shell: string;
  env?: Record<string, string>;
  cwd?: string;
  commandId?: string;
  /** A pseudo-terminal of this size (WebSocket `pty: true`). */
  tty?: { rows: number; cols: number };
  options: CommandOptions;
}

export async function runToCompletion(
  m: SandboxManager,
  id: string,
  argv: string[],
  timeoutSeconds: number,
): Promise<number> {
  const l = m.live.get(id)!;
  const proc = m.driver!.exec(id, l.ref, { argv, env: l.env, cwd: SANDBOX_USER.home });
  proc.stdin.end();
  proc.stdout.resume();
  proc.stderr.resume();
  const t = setTimeout(() => proc.kill(), timeoutSeconds * 1000);
  try {
    return await proc.exited;
  } finally {
    clearTimeout(t);
  }
}

/** Starts a command; its output is kept for reconnects. */
export function startCommandIn(m: SandboxManager, row: SandboxRow, p: ExecParams): CommandSession {
  const l = m.requireLive(row);
  const id = p.commandId ?? newId();
  if (m.commands.get(row.id, id)) throw dataplaneError(409, "CommandError", `Command id ${id} is already in use`);
  const env = { ...l.env, ...(p.env ?? {}), WHARF_FSIZE_LIMIT: String(Number(row.fs_capacity_bytes)) };
  const proc = m.driver!.exec(row.id, l.ref, {
    argv: [p.shell, "-c", p.command],
    env,
    cwd: p.cwd || SANDBOX_USER.home,
    tty: p.tty,
  });
  const session = new CommandSession(id, row.id, proc, p.options);
  m.commands.add(session);
  void session.done.then(() => m.touch(row.id));
  return session;
}

/** Runs a command to completion with the bytes given as stdin (file transfers). */
export async function runWithInputIn(
  m: SandboxManager,
  row: SandboxRow,
  argv: string[],
  input: Buffer | Readable | null,
  onStdout?: (b: Buffer) => void,
): Promise<{ code: number; stderr: string }> {
  const l = m.requireLive(row);
  const proc = m.driver!.exec(row.id, l.ref, {
    argv,
    env: { ...l.env, WHARF_FSIZE_LIMIT: String(Number(row.fs_capacity_bytes)) },
    cwd: SANDBOX_USER.home,
  });
  proc.stdin.on("error", () => {
    // EPIPE once the command exited without reading all its input: its exit code and stderr say why.
  });
  if (input instanceof Readable) {
    // A broken input (client gone, truncated form) kills the command before it sees end-of-file,
    // so a partial upload is never committed as if it were whole.
    input.once("error", () => proc.kill());
    input.pipe(proc.stdin);
  } else proc.stdin.end(input ?? undefined);
  let stderr = "";
  proc.stderr.on("data", (d: Buffer) => (stderr.length < 4000 ? (stderr += d.toString()) : undefined));
  if (onStdout) proc.stdout.on("data", onStdout);
  else proc.stdout.resume();
  const ended = new Promise<void>((r) => proc.stdout.on("close", () => r()));
  const code = await proc.exited;
  await Promise.race([ended, new Promise((r) => setTimeout(r, 200))]);
  return { code, stderr };
}
