import { randomBytes } from "node:crypto";
import { posix } from "node:path";
import { Transform } from "node:stream";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { principalOf } from "../../http/authenticate.ts";
import { ValidationFailed } from "../../http/errors.ts";
import type { AppEnv } from "../../http/principal.ts";
import { toValidationIssues } from "../../http/validation.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { dataplaneError } from "./dataplane-error.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import type { SandboxRow } from "../store/sandbox-store.ts";
import { withMultipartFile } from "./multipart-file.ts";
import type { HeadBuffer } from "./output-buffer.ts";
import { registerSearch } from "./dataplane-search.ts";
import { fileError, serveFile } from "./downloads.ts";
import { CONSOLE_ORIGIN_CONTENT_HEADERS } from "../../http/tenant-hosts.ts";
import { envVars } from "../api/schemas.ts";

export const DATAPLANE_PREFIX = "/sandboxes/dp";
/** Most output one HTTP `/execute` response carries per stream (the WebSocket streams everything). */
export const HTTP_OUTPUT_BYTES = 16 << 20;

export const executeBody = z.object({
  // One exec argument: the kernel caps a single argument at 128 KiB.
  command: z
    .string()
    .min(1)
    .refine((c) => Buffer.byteLength(c) <= 120 * 1024, "Commands are at most 120 KiB; upload a script for longer ones"),
  timeout: z
    .number()
    .min(0)
    .max(24 * 3600)
    .default(60),
  shell: z.string().min(1).max(200).default("/bin/bash"),
  env: envVars.optional(),
  cwd: z.string().min(1).max(4096).optional(),
});

const filePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => !p.includes("\0"), "Paths cannot contain NUL");

function parse<T>(schema: z.ZodType<T>, part: "body" | "query", value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationFailed(toValidationIssues(part, r.error, value));
  return r.data;
}

/** The sandbox addressed by a data-plane URL, if it belongs to the caller's workspace (404 otherwise). */
export async function dataplaneSandbox(ctx: PlatformContext, workspaceId: string, id: string): Promise<SandboxRow> {
  const row = await ctx.db
    .selectFrom("sandboxes")
    .selectAll()
    .where("id", "=", id)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  if (!row) throw dataplaneError(404, "NotFound", "Sandbox not found");
  return row;
}

// Run as the sandbox user, inside the sandbox: paths and symlinks resolve in its own root.
// Written beside the target and renamed into place only when the whole file arrived: a failed or
// interrupted upload leaves the previous file as it was.
const UPLOAD = `p=$1; t=$2; d=$(dirname -- "$p"); [ -d "$d" ] || mkdir -p -- "$d" || exit 13
[ -d "$p" ] && { echo "$p is a directory" >&2; exit 21; }
cat > "$t"; s=$?; [ $s -eq 0 ] || { rm -f -- "$t"; [ $s -eq 153 ] && exit 153; exit 13; }
mv -f -- "$t" "$p" || { rm -f -- "$t"; exit 13; }`;
/** `POST /execute`, `POST /upload`, `GET /download` under each sandbox's `dataplane_url`. */
export function registerDataplane(app: Hono<AppEnv>, ctx: PlatformContext, manager: SandboxManager): void {
  const principal = principalOf(ctx.authenticate);
  // Every data-plane call wakes a stopped sandbox first, as LangSmith Deployment does.
  const sandboxOf = async (c: Context<AppEnv>) =>
    manager.wake(await dataplaneSandbox(ctx, (await principal(c)).workspaceId, c.req.param("id")!));

  app.post(`${DATAPLANE_PREFIX}/:id/execute`, async (c) => {
    const row = await sandboxOf(c);
    let raw: unknown;
    try {
      raw = JSON.parse((await c.req.text()) || "null");
    } catch {
      throw new ValidationFailed([{ loc: ["body", 0], msg: "JSON decode error", type: "json_invalid" }]);
    }
    const body = parse(executeBody, "body", raw);
    const session = manager.startCommand(row, {
      command: body.command,
      shell: body.shell,
      env: body.env,
      cwd: body.cwd,
      options: {
        timeoutSeconds: body.timeout,
        idleTimeoutSeconds: -1,
        ttlSeconds: 0,
        killOnDisconnect: false,
        maxOutputBytes: Math.min(HTTP_OUTPUT_BYTES, manager.settings.maxOutputBytes),
        output: { kind: "head" },
      },
    });
    session.proc.stdin.end();
    const exitCode = await session.done;
    if (session.timedOut)
      throw dataplaneError(408, "CommandTimeout", `Command timed out after ${body.timeout} seconds`);
    const stdout = (session.stdout as HeadBuffer).text();
    const stderr = (session.stderr as HeadBuffer).text();
    // Past the bounded buffer the output was drained, not kept: say so, as the client expects.
    return c.json(
      session.truncated
        ? { stdout, stderr, exit_code: exitCode, truncated: true }
        : { stdout, stderr, exit_code: exitCode },
    );
  });

  app.post(`${DATAPLANE_PREFIX}/:id/upload`, async (c) => {
    const row = await sandboxOf(c);
    const path = parse(filePath, "query", c.req.query("path"));
    manager.requireLive(row);
    const { r, size, broken } = await writeUpload(ctx, manager, row, c.req.raw, path);
    if (broken)
      throw new ValidationFailed([
        { loc: ["body", "file"], msg: "The upload ended before the file was complete", type: "value_error" },
      ]);
    if (r.code !== 0) fileError("WriteError", path, r.code, r.stderr);
    return c.json({ path, size });
  });

  const download = async (c: Context<AppEnv>) => {
    const row = await sandboxOf(c);
    // On the console's origin (the console's Files tab reads it with its session): never a document of it.
    return serveFile(c, manager, row, parse(filePath, "query", c.req.query("path")), {
      headers: CONSOLE_ORIGIN_CONTENT_HEADERS,
    });
  };
  app.get(`${DATAPLANE_PREFIX}/:id/download`, download);
  app.on("HEAD", `${DATAPLANE_PREFIX}/:id/download`, download);
  registerSearch(app, DATAPLANE_PREFIX, sandboxOf, manager);
}

/** Streams the form's file into the sandbox through a temporary file renamed into place once whole. */
function writeUpload(ctx: PlatformContext, manager: SandboxManager, row: SandboxRow, raw: Request, path: string) {
  const temp = `${posix.dirname(path)}/.${posix.basename(path)}.wharf-upload-${randomBytes(6).toString("hex")}`;
  return withMultipartFile(raw, "file", async (file) => {
    let size = 0;
    let broken = false;
    const counted = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        done(null, chunk);
      },
    });
    file.once("error", (err) => ((broken = true), counted.destroy(err)));
    try {
      const r = await manager.runWithInput(row, ["/bin/sh", "-c", UPLOAD, "sh", path, temp], file.pipe(counted));
      // Killed mid-write: its temporary file is all that is left of the attempt.
      if (broken)
        await manager
          .runWithInput(row, ["rm", "-f", "--", temp], null)
          .catch((err) => ctx.log.warn({ sandboxId: row.id, err }, "temporary upload file not removed"));
      return { r, size, broken };
    } finally {
      // The command may have stopped reading (a directory, no permission): let the form finish.
      file.unpipe(counted);
      file.resume();
    }
  });
}
