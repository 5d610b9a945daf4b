import fs from "node:fs";
import path from "node:path";
import * as tar from "tar";
import type { DeploymentsLayout } from "../layout.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { runCommand } from "./run-command.ts";
import { redactUrl } from "../../log/redact-url.ts";

export class SourceError extends Error {}

export interface SourceSpec {
  source_tarball_path?: string | null;
  local_path?: string | null;
  repo_url?: string | null;
  repo_ref?: string | null;
}

/** Folders never copied from a local directory: installs, VCS data, Wharf's own state. */
const SKIPPED_NAMES = new Set(["node_modules", ".git", ".wharf", ".langgraph_api"]);

/** Git may only use these transports (no `ext::` command execution from a user-given URL). */
const GIT_PROTOCOLS = "file:git:http:https:ssh";

/**
 * Puts a revision's source tree into `dest`: an uploaded tarball, a git repository at `repo_ref`,
 * or a copy of a local directory. Returns the commit for git sources.
 */
export async function fetchSource(
  spec: SourceSpec,
  dest: string,
  ctx: { layout: DeploymentsLayout; log: RevisionLog; signal: AbortSignal; home: string },
): Promise<{ commitSha: string | null }> {
  fs.rmSync(dest, { recursive: true, force: true });
  if (spec.source_tarball_path) {
    const file = ctx.layout.uploadFile(spec.source_tarball_path);
    if (!fs.existsSync(file)) throw new SourceError(`uploaded tarball ${spec.source_tarball_path} is gone`);
    fs.mkdirSync(dest, { recursive: true });
    ctx.log.line(`extracting uploaded tarball ${spec.source_tarball_path} (${fs.statSync(file).size} bytes)`);
    // node-tar refuses absolute paths and `..` entries unless asked to keep them.
    await tar.x({ file, cwd: dest, strict: true, noChmod: true }).catch((err: Error) => {
      throw new SourceError(`the uploaded tarball cannot be extracted: ${err.message}`);
    });
    return { commitSha: null };
  }
  if (spec.local_path) {
    const from = path.resolve(spec.local_path);
    if (!fs.existsSync(from) || !fs.statSync(from).isDirectory()) throw new SourceError(`local_path ${from} is not a directory`);
    ctx.log.line(`copying ${from}`);
    const home = path.resolve(ctx.home);
    fs.cpSync(from, dest, {
      recursive: true,
      dereference: false,
      filter: (src) => !SKIPPED_NAMES.has(path.basename(src)) && path.resolve(src) !== home,
    });
    return { commitSha: null };
  }
  if (spec.repo_url) {
    const env = { ...process.env, GIT_TERMINAL_PROMPT: "0", GIT_ALLOW_PROTOCOL: GIT_PROTOCOLS, GIT_CONFIG_NOSYSTEM: "1" };
    const ref = spec.repo_ref ?? null;
    const isSha = ref !== null && /^[0-9a-f]{7,40}$/i.test(ref);
    const branch = ref && !isSha ? ref.replace(/^refs\/(heads|tags)\//, "") : null;
    ctx.log.line(`cloning ${redactUrl(spec.repo_url)}${ref ? ` at ${ref}` : ""}`);
    const args = ["clone", "--quiet", "--no-tags", ...(isSha ? [] : ["--depth", "1"]), ...(branch ? ["--branch", branch] : []), "--", spec.repo_url, dest];
    await runCommand("git", args, { cwd: ctx.layout.builds, env, log: ctx.log, signal: ctx.signal, what: "git clone" });
    if (isSha) await runCommand("git", ["-C", dest, "checkout", "--quiet", "--detach", ref], { cwd: dest, env, log: ctx.log, signal: ctx.signal, what: "git checkout" });
    const sha = (await runCommand("git", ["-C", dest, "rev-parse", "HEAD"], { cwd: dest, env, log: ctx.log, signal: ctx.signal, what: "git rev-parse", capture: true })).trim();
    ctx.log.line(`checked out commit ${sha}`);
    fs.rmSync(path.join(dest, ".git"), { recursive: true, force: true });
    return { commitSha: sha };
  }
  throw new SourceError("the revision names no source (source_tarball_path, local_path or repo_url)");
}
