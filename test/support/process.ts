import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const WHARF_BIN = path.join(REPO_ROOT, "bin/wharf.js");

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

export interface WharfProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

/** Runs the real CLI (`node bin/wharf.js ...`) as a child process, capturing its output. */
export function runWharf(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): WharfProcess {
  const child = spawn(process.execPath, [WHARF_BIN, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: { ...process.env, WHARF_LOG_LEVEL: "info", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/**
 * Polls `url` until it answers 200 or the deadline passes; returns the time to that answer. Then one
 * request to another path of the same server, which `wharf up` holds until the platform is attached
 * (bootstrap key written, routes mounted), so the caller may use the platform at once.
 */
export async function waitForOk(url: string, timeoutMs = 60_000): Promise<number> {
  const started = performance.now();
  for (;;) {
    try {
      const res = await fetch(url);
      if (res.ok) {
        await res.arrayBuffer();
        const ms = performance.now() - started;
        const settled = await fetch(new URL("/v2/me", url), {
          signal: AbortSignal.timeout(Math.max(1000, Math.round(timeoutMs - ms))),
        });
        const body = await settled.text();
        // 503 from a held request: start-up failed after the port was bound.
        if (settled.status === 503 && body.includes("could not start"))
          throw Object.assign(new Error(body), { fatal: true });
        return ms;
      }
    } catch (err) {
      if ((err as { fatal?: boolean }).fatal) throw err;
      // Otherwise not up yet: connection refused, or the held request timed out.
    }
    if (performance.now() - started > timeoutMs) throw new Error(`${url} did not answer within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Runs a CLI command to completion; returns its exit code and output. */
export async function wharfCli(
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<{ code: number | null; out: string }> {
  const p = runWharf(args, options);
  const code = await p.exited;
  return { code, out: p.output() };
}
