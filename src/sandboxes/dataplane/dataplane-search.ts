import type { Context, Hono } from "hono";
import { z } from "zod";
import { ValidationFailed } from "../../http/errors.ts";
import type { AppEnv } from "../../http/principal.ts";
import { toValidationIssues } from "../../http/validation.ts";
import { SANDBOX_USER } from "../../confinement/index.ts";
import {
  globDepth,
  globToRegExp,
  grepFileFilter,
  parseFindRecord,
  parseGrepLine,
  searchRoot,
  type FoundEntry,
  type GrepMatch,
} from "./file-search.ts";
import { dataplaneError } from "./dataplane-error.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import type { SandboxRow } from "../store/sandbox-store.ts";

const DEFAULT_LIMIT = 1000;
const MAX_LIMIT = 10_000;
/** A search past this is cut short and answered with what it found (`truncated`). */
const DEADLINE_MS = 20_000;

const noNul = (s: string) => !s.includes("\0");
/** Patterns become regular expressions matched on the platform: bound their wildcards (no ReDoS). */
const MAX_WILDCARDS = 16;
const fewWildcards = (p: string) => (p.match(/[*?]/g) ?? []).length <= MAX_WILDCARDS;
const globBody = z.object({
  pattern: z
    .string()
    .min(1)
    .max(1024)
    .refine(noNul, "No NUL characters")
    .refine(fewWildcards, `At most ${MAX_WILDCARDS} wildcards`),
  path: z.string().min(1).max(4096).refine(noNul, "No NUL characters").default(SANDBOX_USER.home),
  limit: z.number().int().min(1).max(MAX_LIMIT).default(DEFAULT_LIMIT),
});
const grepBody = globBody.extend({
  pattern: z.string().min(1).max(4096).refine(noNul, "No NUL characters"),
  glob: z
    .string()
    .min(1)
    .max(1024)
    .refine(noNul, "No NUL characters")
    .refine(fewWildcards, `At most ${MAX_WILDCARDS} wildcards`)
    .optional(),
});

// Run as the sandbox user inside the sandbox; 2 = no such path, 20 = not a directory (glob only).
const FIND = `[ -e "$1" ] || exit 2; [ -d "$1" ] || exit 20; if [ "$2" = - ]; then exec find "$1" -mindepth 1 -printf '%y\\t%s\\t%T@\\t%P\\0' 2>/dev/null; fi; exec find "$1" -mindepth 1 -maxdepth "$2" -printf '%y\\t%s\\t%T@\\t%P\\0' 2>/dev/null`;
const GREP = `[ -e "$1" ] || exit 2; find "$1" -type f -print0 2>/dev/null | xargs -0 -r grep -nHIFZ -e "$2" -- 2>/dev/null; exit 0`;

/**
 * Runs a search command in the sandbox and feeds its output, record by record, to `take` until it
 * says stop; then the command is killed. Nothing is held beyond one partial record.
 */
async function streamRecords(
  manager: SandboxManager,
  row: SandboxRow,
  argv: string[],
  separator: string,
  take: (record: string) => boolean,
): Promise<{ code: number; cut: boolean }> {
  const live = manager.requireLive(row);
  const proc = manager.driver!.exec(row.id, live.ref, { argv, env: live.env, cwd: SANDBOX_USER.home });
  proc.stdin.end();
  proc.stderr.resume();
  let rest = "";
  let cut = false;
  const stop = () => {
    if (cut) return;
    cut = true;
    proc.kill();
  };
  const timer = setTimeout(stop, DEADLINE_MS);
  proc.stdout.setEncoding("utf8");
  proc.stdout.on("data", (chunk: string) => {
    if (cut) return;
    rest += chunk;
    let i: number;
    while ((i = rest.indexOf(separator)) >= 0) {
      const record = rest.slice(0, i);
      rest = rest.slice(i + separator.length);
      if (!take(record)) return stop();
    }
    // A single record longer than this is not a file name or a line worth returning.
    if (rest.length > 1 << 20) rest = "";
  });
  const ended = new Promise<void>((r) => proc.stdout.on("close", () => r()));
  const code = await proc.exited;
  await Promise.race([ended, new Promise((r) => setTimeout(r, 200))]);
  clearTimeout(timer);
  return { code, cut };
}

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationFailed(toValidationIssues("body", r.error, value));
  return r.data;
}

async function jsonBody(c: Context<AppEnv>): Promise<unknown> {
  try {
    return JSON.parse((await c.req.text()) || "null");
  } catch {
    throw new ValidationFailed([{ loc: ["body", 0], msg: "JSON decode error", type: "json_invalid" }]);
  }
}

function notFound(path: string, code: number): void {
  if (code === 2) throw dataplaneError(404, "FileNotFound", `File not found: ${path}`);
  if (code === 20) throw dataplaneError(400, "ReadError", `${path} is not a directory`);
}

/** `POST /glob` and `POST /grep` under each sandbox's `dataplane_url`. */
export function registerSearch(
  app: Hono<AppEnv>,
  prefix: string,
  sandboxOf: (c: Context<AppEnv>) => Promise<SandboxRow>,
  manager: SandboxManager,
): void {
  app.post(`${prefix}/:id/glob`, async (c) => {
    const row = await sandboxOf(c);
    const body = parse(globBody, await jsonBody(c));
    const root = searchRoot(body.path, SANDBOX_USER.home);
    const re = globToRegExp(body.pattern.replace(/^\.\//, ""));
    const depth = globDepth(body.pattern);
    const matches: FoundEntry[] = [];
    let full = false;
    const { code, cut } = await streamRecords(
      manager,
      row,
      ["/bin/sh", "-c", FIND, "sh", root, depth === null ? "-" : String(depth)],
      "\0",
      (record) => {
        const e = parseFindRecord(record, root);
        if (!e || !re.test(e.relative)) return true;
        const { relative: _relative, ...entry } = e;
        matches.push(entry);
        full = matches.length >= body.limit;
        return !full;
      },
    );
    notFound(root, code);
    matches.sort((a, b) => a.path.localeCompare(b.path));
    return c.json({ matches, truncated: full || cut });
  });

  app.post(`${prefix}/:id/grep`, async (c) => {
    const row = await sandboxOf(c);
    const body = parse(grepBody, await jsonBody(c));
    const root = searchRoot(body.path, SANDBOX_USER.home);
    const filter = grepFileFilter(body.glob);
    const matches: GrepMatch[] = [];
    let full = false;
    const { code, cut } = await streamRecords(
      manager,
      row,
      ["/bin/sh", "-c", GREP, "sh", root, body.pattern],
      "\n",
      (line) => {
        const m = parseGrepLine(line);
        if (!m) return true;
        const relative = m.path === root ? m.path.split("/").pop()! : m.path.slice(root.length).replace(/^\/+/, "");
        if (filter && !filter(relative)) return true;
        matches.push(m);
        full = matches.length >= body.limit;
        return !full;
      },
    );
    notFound(root, code);
    return c.json({ matches, truncated: full || cut });
  });
}
