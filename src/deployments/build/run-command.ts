import { spawn } from "node:child_process";
import type { RevisionLog } from "../store/revision-logs.ts";

export class CommandFailed extends Error {}

/**
 * Runs a build command to completion, its output going line by line to the revision's log. The
 * abort signal (phase deadline, interrupt, shutdown) kills the whole process group.
 */
export async function runCommand(
  command: string,
  args: string[],
  options: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    log: RevisionLog;
    signal: AbortSignal;
    what: string;
    capture?: boolean;
  },
): Promise<string> {
  options.signal.throwIfAborted();
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let captured = "";
  const out = options.log.lineSink("info");
  const err = options.log.lineSink("info");
  child.stdout!.on("data", (d: Buffer) => {
    if (options.capture) captured += d.toString();
    else out(d);
  });
  child.stderr!.on("data", (d: Buffer) => err(d));
  const kill = () => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      /* already gone */
    }
  };
  options.signal.addEventListener("abort", kill, { once: true });
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (c, sig) => resolve(sig ? null : c));
    });
    options.signal.throwIfAborted();
    if (code !== 0) throw new CommandFailed(`${options.what} failed (exit ${code ?? "signal"})`);
    return captured;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT")
      throw new CommandFailed(`${options.what}: \`${command}\` is not installed on the platform's machine`);
    throw e;
  } finally {
    options.signal.removeEventListener("abort", kill);
  }
}
