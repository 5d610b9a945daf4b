import fs from "node:fs";
import path from "node:path";
import * as tar from "tar";
import type { DeploymentsLayout } from "../layout.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { runCommand } from "./run-command.ts";
import { redactUrl } from "../../log/redact-url.ts";
import { REFUSAL_HINT, startOutboundProxy, type OutboundPolicy } from "../../egress/index.ts";
import { copyTree, CopyRefused } from "./copy-tree.ts";
import { LocalPathRefused, resolveLocalPath } from "./local-roots.ts";
import { repoUrlProblem } from "./repo-url.ts";
import { processEnvironment } from "../../config/index.ts";

export class SourceError extends Error {}

export interface SourceSpec {
  source_tarball_path?: string | null;
  local_path?: string | null;
  repo_url?: string | null;
  repo_ref?: string | null;
}

/** What a fetch may reach on the platform's machine and network (operator settings). */
export interface SourcePolicy {
  localRoots: string[];
  /** Largest local folder copied (bytes), the same bound as an upload. */
  maxLocalBytes: number;
  outbound: OutboundPolicy;
}

/** Folders never copied from a local directory: installs, VCS data, Wharf's own state. */
const SKIPPED_NAMES = new Set(["node_modules", ".git", ".wharf", ".langgraph_api"]);
const MAX_LOCAL_FILES = 100_000;

interface FetchContext {
  layout: DeploymentsLayout;
  log: RevisionLog;
  signal: AbortSignal;
  home: string;
  sources: SourcePolicy;
}

/**
 * Puts a revision's source tree into `dest`: an uploaded tarball, a git repository at `repo_ref`,
 * or a copy of a local directory. Returns the commit for git sources.
 */
export async function fetchSource(
  spec: SourceSpec,
  dest: string,
  ctx: FetchContext,
): Promise<{ commitSha: string | null }> {
  await fs.promises.rm(dest, { recursive: true, force: true });
  if (spec.source_tarball_path) {
    const file = ctx.layout.uploadFile(spec.source_tarball_path);
    if (!fs.existsSync(file)) throw new SourceError(`uploaded tarball ${spec.source_tarball_path} is gone`);
    fs.mkdirSync(dest, { recursive: true });
    ctx.log.line(`extracting uploaded tarball ${spec.source_tarball_path} (${fs.statSync(file).size} bytes)`);
    // node-tar refuses absolute paths and `..` entries unless asked to keep them.
    await tar.x({ file, cwd: dest, strict: true, noChmod: true }).catch((err: Error) => {
      throw new SourceError(`the uploaded tarball cannot be extracted: ${err.message}`, { cause: err });
    });
    return { commitSha: null };
  }
  if (spec.local_path) return copyLocal(spec.local_path, dest, ctx);
  if (spec.repo_url) return cloneRepo(spec.repo_url, spec.repo_ref ?? null, dest, ctx);
  throw new SourceError("the revision names no source (source_tarball_path, local_path or repo_url)");
}

/** Checked again at build time: the roots or the folder may have changed since the request. */
async function copyLocal(localPath: string, dest: string, ctx: FetchContext): Promise<{ commitSha: null }> {
  let from: string;
  try {
    from = await resolveLocalPath(localPath, ctx.sources.localRoots, ctx.home);
  } catch (err) {
    if (err instanceof LocalPathRefused) throw new SourceError(err.message, { cause: err });
    throw err;
  }
  ctx.log.line(`copying ${from}`);
  const home = await fs.promises.stat(ctx.home).catch(() => null);
  try {
    const { files, bytes } = await copyTree(from, dest, {
      skipNames: SKIPPED_NAMES,
      skipDir: home ? { dev: home.dev, ino: home.ino } : null,
      maxBytes: ctx.sources.maxLocalBytes,
      maxFiles: MAX_LOCAL_FILES,
      signal: ctx.signal,
      log: (line) => ctx.log.line(line),
    });
    ctx.log.line(`copied ${files} files (${bytes} bytes)`);
  } catch (err) {
    if (err instanceof CopyRefused) throw new SourceError(err.message, { cause: err });
    throw err;
  }
  return { commitSha: null };
}

/**
 * git over HTTP(S) only, through a proxy that applies the egress address policy (redirects
 * included); no file transport even for submodules, and none of the operator's git configuration
 * (a `http.<url>.proxy` there would route around the proxy).
 */
async function cloneRepo(
  repoUrl: string,
  ref: string | null,
  dest: string,
  ctx: FetchContext,
): Promise<{ commitSha: string }> {
  const problem = repoUrlProblem(repoUrl);
  if (problem) throw new SourceError(problem);
  const proxy = await startOutboundProxy(ctx.sources.outbound);
  try {
    const inherited = Object.fromEntries(
      Object.entries(processEnvironment()).filter(
        ([k]) => !/^(https?|all|no)_proxy$/i.test(k) && !k.startsWith("GIT_"),
      ),
    );
    const env = {
      ...inherited,
      GIT_TERMINAL_PROMPT: "0",
      GIT_ALLOW_PROTOCOL: "http:https",
      GIT_PROTOCOL_FROM_USER: "0",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
    };
    const config = [
      "-c",
      "protocol.file.allow=never",
      "-c",
      "protocol.allow=never",
      "-c",
      "protocol.https.allow=always",
      "-c",
      "protocol.http.allow=always",
      "-c",
      `http.proxy=${proxy.url}`,
      "-c",
      "http.followRedirects=initial",
    ];
    const git = (args: string[], cwd: string, what: string, capture = false) =>
      runCommand("git", [...config, ...args], { cwd, env, log: ctx.log, signal: ctx.signal, what, capture });
    const isSha = ref !== null && /^[0-9a-f]{7,40}$/i.test(ref);
    const branch = ref && !isSha ? ref.replace(/^refs\/(heads|tags)\//, "") : null;
    ctx.log.line(`cloning ${redactUrl(repoUrl)}${ref ? ` at ${ref}` : ""}`);
    try {
      await git(
        [
          "clone",
          "--quiet",
          "--no-tags",
          ...(isSha ? [] : ["--depth", "1"]),
          ...(branch ? ["--branch", branch] : []),
          "--",
          repoUrl,
          dest,
        ],
        ctx.layout.builds,
        "git clone",
      );
    } catch (err) {
      // The policy's reason rather than git's: the same text whether or not anything listens there.
      if (proxy.refusals.length)
        throw new SourceError(
          `git clone was refused by the platform's egress policy: ${proxy.refusals[0]} (${REFUSAL_HINT})`,
          { cause: err },
        );
      throw err;
    }
    if (isSha) await git(["-C", dest, "checkout", "--quiet", "--detach", ref], dest, "git checkout");
    const sha = (await git(["-C", dest, "rev-parse", "HEAD"], dest, "git rev-parse", true)).trim();
    ctx.log.line(`checked out commit ${sha}`);
    await fs.promises.rm(path.join(dest, ".git"), { recursive: true, force: true });
    return { commitSha: sha };
  } finally {
    await proxy.close();
  }
}
