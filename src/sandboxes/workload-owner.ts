import type { WorkloadOwner } from "../cluster/index.ts";
import type { PlatformContext } from "../platform/context.ts";
import { DATAPLANE_PREFIX } from "./dataplane/dataplane.ts";
import { DOWNLOAD_LINK_PREFIX } from "./dataplane/downloads.ts";
import { SERVICE_PREFIX } from "./links/service-urls.ts";
import { ownerOfSandbox } from "./store/sandbox-store.ts";
import { verifyLink } from "./links/signed-links.ts";

/** How long a sandbox's owner is reused before it is read again (a sandbox changes owner only when woken elsewhere). */
const OWNER_TTL_MS = 1000;

const escape = (s: string) => s.replace(/[/]/g, "\\/");
const BY_ID = new RegExp(`^(?:${escape(DATAPLANE_PREFIX)}|${escape(SERVICE_PREFIX)})/([^/?#]+)(?:[/?#]|$)`);
const BY_LINK = new RegExp(`^${escape(DOWNLOAD_LINK_PREFIX)}/([^/?#]+)`);

/** The sandbox a data-plane target names: by id in its path, or by the signed download link's claims. */
export function sandboxOfTarget(target: string, linkSandbox: (token: string) => string | null): string | null {
  const byId = BY_ID.exec(target);
  if (byId) return decodeURIComponent(byId[1]);
  const byLink = BY_LINK.exec(target);
  return byLink ? linkSandbox(byLink[1]) : null;
}

/**
 * Replica mode: a sandbox's data plane (execute and its WebSocket, files, downloads, service and
 * browser URLs) is served by the replica that runs it.
 */
export function sandboxWorkloadOwner(ctx: PlatformContext): WorkloadOwner {
  const cache = new Map<string, { at: number; owner: Promise<string | null> }>();
  const linkSandbox = (token: string) => verifyLink(ctx.box, "download", token)?.s ?? null;
  return (target) => {
    let id: string | null;
    try {
      id = sandboxOfTarget(target, linkSandbox);
    } catch {
      return null; // a malformed escape: the local route answers it
    }
    if (!id) return null;
    const hit = cache.get(id);
    if (hit && Date.now() - hit.at < OWNER_TTL_MS) return hit.owner;
    if (cache.size > 10_000) cache.clear();
    const owner = ownerOfSandbox(ctx.db, id);
    cache.set(id, { at: Date.now(), owner });
    owner.catch(() => cache.delete(id));
    return owner;
  };
}
