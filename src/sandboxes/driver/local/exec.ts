import { spawn } from "node:child_process";
import {
  childrenOf,
  descendantsOf,
  ENTER_ENV_FD,
  enterArgs,
  enterEnvironment,
  killGroupsAndProcesses,
  namespacePid,
  SANDBOX_USER,
} from "../../../confinement/index.ts";
import type { ExecProcess, ExecRequest } from "../driver.ts";
import type { LocalHost } from "./host.ts";
import type { LocalRef } from "./ref.ts";

export function exec(host: LocalHost, id: string, r: LocalRef, req: ExecRequest): ExecProcess {
  const fsize = String(req.env.WHARF_FSIZE_LIMIT ?? 0);
  const env = Object.fromEntries(Object.entries(req.env).filter(([k]) => k !== "WHARF_FSIZE_LIMIT"));
  const pty = req.tty ? `${clampTty(req.tty.rows)}x${clampTty(req.tty.cols)}` : "-";
  const args = [
    ...enterArgs(),
    host.sysArg,
    String(ENTER_ENV_FD),
    String(SANDBOX_USER.uid),
    String(r.init.pid),
    String(r.init.start),
    host.cg.procsFiles(id).join(":"),
    host.bpfHex,
    fsize,
    req.cwd,
    pty,
    "--",
    ...req.argv,
  ];
  // An empty environment for the launcher (root); the command's own arrives on a pipe (a command
  // line is readable by every local user). With a terminal, fd 3 carries resize requests.
  const child = spawn("/usr/bin/perl", args, {
    stdio: ["pipe", "pipe", "pipe", req.tty ? "pipe" : "ignore", "pipe"],
    env: {},
  });
  const envPipe = child.stdio[ENTER_ENV_FD] as NodeJS.WritableStream;
  envPipe.on("error", () => undefined); // the launcher died before reading it: its exit says why
  envPipe.end(enterEnvironment(env));
  const control = req.tty ? (child.stdio[3] as NodeJS.WritableStream) : null;
  control?.on("error", () => undefined); // the launcher is gone: a late resize has nowhere to go
  const exited = new Promise<number>((resolve) => {
    child.on("exit", (code, signal) => resolve(code ?? 128 + signalNumber(signal)));
    child.on("error", (err) => {
      host.opts.log?.("a command launcher failed (not started, or not killed)", { id, err });
      resolve(127);
    });
  });
  const hostPid = async (): Promise<number> => {
    // The launcher forks once to enter the pid namespace: the command is its child.
    for (let i = 0; i < 50 && child.pid; i++) {
      const kids = childrenOf(child.pid);
      if (kids.length) return kids[0];
      await new Promise((res) => setTimeout(res, 1));
    }
    return 0;
  };
  return {
    stdin: child.stdin!,
    stdout: child.stdout!,
    stderr: child.stderr!,
    exited,
    pid: async () => {
      const p = await hostPid();
      return p ? (namespacePid(p) ?? 0) : 0;
    },
    resize: control
      ? (rows: number, cols: number) => void control.write(`${clampTty(rows)} ${clampTty(cols)}\n`)
      : undefined,
    kill: () => {
      // With a terminal the command is a grandchild (the launcher's child pumps the terminal).
      killGroupsAndProcesses(child.pid ? descendantsOf(child.pid) : []);
      try {
        child.kill("SIGKILL");
      } catch {
        // the launcher already exited
      }
    },
  };
}

function clampTty(n: number): number {
  return Math.max(1, Math.min(1000, Math.floor(n) || 1));
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};
function signalNumber(signal: NodeJS.Signals | null): number {
  return signal ? (SIGNALS[signal] ?? 1) : 1;
}
