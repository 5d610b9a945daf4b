import fs from "node:fs";
import path from "node:path";

/**
 * `local_path` names a folder on the platform's machine, so it is an operator feature: only
 * folders under `WHARF_DEPLOY_LOCAL_ROOTS` are accepted, checked both as written and with every
 * link resolved (a link or `/proc/self/root/...` alias cannot lead out). Whatever the reason a
 * path is refused, the text is the same: whether something exists outside the roots stays unknown.
 */
export class LocalPathRefused extends Error {}

export const LOCAL_PATH_OFF =
  "local_path is turned off on this platform: the operator enables it by listing folders in WHARF_DEPLOY_LOCAL_ROOTS. Upload a tarball instead (wharf deploy without --local).";
export const LOCAL_PATH_OUTSIDE =
  "local_path must be an existing folder under one of the folders in the platform's WHARF_DEPLOY_LOCAL_ROOTS";

/** Kernel and device trees are never a source, whatever the roots say. */
const NEVER = ["/proc", "/sys", "/dev"];

/** `child` is `parent` or inside it (both absolute and normalised). */
export function isWithin(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/** The decision on already-resolved paths (pure): null when the folder may be copied. */
export function localPathProblem(p: {
  written: string;
  real: string | null;
  roots: string[];
  realRoots: string[];
  realHome: string | null;
}): string | null {
  if (p.roots.length === 0) return LOCAL_PATH_OFF;
  if (!path.isAbsolute(p.written)) return LOCAL_PATH_OUTSIDE;
  if (!p.roots.some((r) => isWithin(path.resolve(p.written), path.resolve(r)))) return LOCAL_PATH_OUTSIDE;
  if (p.real === null || !p.realRoots.some((r) => isWithin(p.real!, r))) return LOCAL_PATH_OUTSIDE;
  if (NEVER.some((n) => isWithin(p.real!, n))) return LOCAL_PATH_OUTSIDE;
  if (p.realHome && isWithin(p.real, p.realHome)) return LOCAL_PATH_OUTSIDE;
  return null;
}

async function realOrNull(p: string): Promise<string | null> {
  try {
    return await fs.promises.realpath(p);
  } catch {
    return null; // absent or unreadable: refused with the same text as any other path
  }
}

/**
 * The folder `written` names, resolved, when it may be built from; throws `LocalPathRefused`
 * otherwise. Nothing is looked up on the machine unless the path is written under a root.
 */
export async function resolveLocalPath(written: string, roots: string[], home: string): Promise<string> {
  const early = localPathProblem({ written, real: "/", roots, realRoots: ["/"], realHome: null });
  if (early) throw new LocalPathRefused(early);
  const realRoots = (await Promise.all(roots.map(realOrNull))).filter((r): r is string => r !== null);
  const real = await realOrNull(written);
  const problem = localPathProblem({ written, real, roots, realRoots, realHome: await realOrNull(home) });
  if (problem) throw new LocalPathRefused(problem);
  const st = await fs.promises.stat(real!).catch(() => null);
  if (!st?.isDirectory()) throw new LocalPathRefused(LOCAL_PATH_OUTSIDE);
  return real!;
}
