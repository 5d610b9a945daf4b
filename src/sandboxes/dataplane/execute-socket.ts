import type { WebSocket } from "ws";
import { z } from "zod";
import { HttpError } from "../../http/errors.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { CommandEvent, CommandSession } from "./commands.ts";
import { dataplaneSandbox } from "./dataplane.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { envVars } from "../api/schemas.ts";
import type { SpillBuffer } from "./output-buffer.ts";
import type { SandboxRow } from "../store/sandbox-store.ts";

const executeMsg = z.object({
  type: z.literal("execute"),
  command: z
    .string()
    .min(1)
    .refine((c) => Buffer.byteLength(c) <= 120 * 1024, "Commands are at most 120 KiB"),
  timeout_seconds: z.number().min(0).default(60),
  shell: z.string().min(1).default("/bin/bash"),
  idle_timeout_seconds: z.number().default(300),
  kill_on_disconnect: z.boolean().default(false),
  ttl_seconds: z.number().min(0).default(600),
  env: envVars.optional(),
  cwd: z.string().min(1).optional(),
  command_id: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,128}$/)
    .optional(),
  close_stdin: z.boolean().optional(),
  pty: z.boolean().optional(),
  cols: z.number().int().min(1).max(1000).default(80),
  rows: z.number().int().min(1).max(1000).default(24),
});
const reconnectMsg = z.object({
  type: z.literal("reconnect"),
  command_id: z.string().min(1),
  stdout_offset: z.number().int().min(0).default(0),
  stderr_offset: z.number().int().min(0).default(0),
});
const controlMsg = z.discriminatedUnion("type", [
  z.object({ type: z.literal("kill") }),
  z.object({ type: z.literal("input"), data: z.string() }),
  z.object({ type: z.literal("close_stdin") }),
  z.object({
    type: z.literal("resize"),
    cols: z.number().int().min(1).max(1000),
    rows: z.number().int().min(1).max(1000),
  }),
]);

/** One execute WebSocket: the command it starts or re-attaches to, and the control messages after. */
export function serveExecuteSocket(
  ctx: PlatformContext,
  manager: SandboxManager,
  ws: WebSocket,
  sandboxId: string,
  workspaceId: string,
): void {
  let session: CommandSession | null = null;
  let detach: (() => void) | null = null;
  const send = (m: unknown) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(m));
  const fail = (error_type: string, error: string) => {
    send({ type: "error", error_type, error });
    ws.close(1000);
  };
  const follow = (s: CommandSession, stdoutOffset: number, stderrOffset: number) => {
    session = s;
    send({ type: "started", command_id: s.id, pid: s.pid });
    detach = s.attach(
      (e: CommandEvent) => {
        send(e);
        if (e.type === "exit") ws.close(1000);
      },
      stdoutOffset,
      stderrOffset,
    );
  };
  ws.on("close", () => detach?.());
  ws.on("error", () => detach?.());
  ws.on("message", (raw) => {
    void (async () => {
      let msg: unknown;
      try {
        msg = JSON.parse(raw.toString());
      } catch {
        return fail("InvalidMessage", "Messages are JSON objects");
      }
      const type = (msg as { type?: unknown })?.type;
      try {
        manager.touch(sandboxId);
        if (type === "execute" || type === "reconnect") {
          if (session) return fail("InvalidMessage", "This connection already follows a command");
          const row = await dataplaneSandbox(ctx, workspaceId, sandboxId);
          if (type === "execute") {
            const p = executeMsg.safeParse(msg);
            if (!p.success)
              return fail("InvalidMessage", p.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
            const s = startFrom(manager, row, p.data);
            if (p.data.close_stdin) s.proc.stdin.end();
            s.pid = await s.proc.pid();
            follow(s, 0, 0);
          } else {
            const p = reconnectMsg.safeParse(msg);
            if (!p.success)
              return fail("InvalidMessage", p.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
            const s = manager.commands.get(row.id, p.data.command_id);
            const lost = s ? null : manager.lostCommand(row.id, p.data.command_id);
            if (lost) {
              replayLost(send, lost, p.data);
              return fail(
                "CommandError",
                "The command was running when the platform restarted and was ended; its output up to then was replayed",
              );
            }
            if (!s) return fail("CommandNotFound", `Command not found: ${p.data.command_id}`);
            follow(s, p.data.stdout_offset, p.data.stderr_offset);
          }
          return;
        }
        const p = controlMsg.safeParse(msg);
        if (!p.success) return fail("InvalidMessage", `Unknown message type ${String(type)}`);
        if (!session) return fail("InvalidMessage", "No command on this connection yet");
        applyControl(session as CommandSession, p.data);
      } catch (err) {
        if (err instanceof HttpError) return fail(...socketError(err));
        ctx.log.error({ err }, "websocket message failed");
        fail("CommandError", "Internal error");
      }
    })();
  });
}

/** Starts the command an `execute` message asks for; its output spills to disk for reconnects. */
function startFrom(manager: SandboxManager, row: SandboxRow, data: z.infer<typeof executeMsg>): CommandSession {
  return manager.startCommand(row, {
    command: data.command,
    shell: data.shell,
    env: data.env,
    cwd: data.cwd,
    commandId: data.command_id,
    tty: data.pty ? { rows: data.rows, cols: data.cols } : undefined,
    options: {
      timeoutSeconds: data.timeout_seconds,
      idleTimeoutSeconds: data.idle_timeout_seconds,
      ttlSeconds: data.ttl_seconds,
      killOnDisconnect: data.kill_on_disconnect,
      maxOutputBytes: manager.settings.maxOutputBytes,
      output: { kind: "spill", dir: manager.commandOutputDir(row.id) },
    },
  });
}

/** Ran when the platform restarted: what it printed until then, from the client's offsets (the caller says why it ended). */
function replayLost(
  send: (m: unknown) => unknown,
  lost: { stdout: SpillBuffer; stderr: SpillBuffer },
  from: { command_id: string; stdout_offset: number; stderr_offset: number },
): void {
  send({ type: "started", command_id: from.command_id, pid: 0 });
  for (const c of lost.stdout.since(from.stdout_offset)) send({ type: "stdout", ...c });
  for (const c of lost.stderr.since(from.stderr_offset)) send({ type: "stderr", ...c });
}

/** A control message for the command this connection follows. */
function applyControl(s: CommandSession, data: z.infer<typeof controlMsg>): void {
  if (data.type === "kill") s.kill();
  else if (data.type === "input") s.proc.stdin.write(data.data);
  else if (data.type === "resize") s.proc.resize?.(data.rows, data.cols);
  else s.proc.stdin.end();
}

/** The error type and message an HttpError (a data-plane error or a plain detail) becomes on the socket. */
function socketError(err: HttpError): [string, string] {
  const d = err.detail as { error?: string; message?: string } | string;
  return [
    typeof d === "object" ? (d.error ?? "CommandError") : "CommandError",
    typeof d === "object" ? (d.message ?? "") : d,
  ];
}
