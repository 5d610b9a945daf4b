import { z } from "zod";
import { notFound } from "../../http/errors.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { findSandbox, type SandboxRow } from "../store/sandbox-store.ts";
import { DEFAULTS } from "./schemas.ts";

export const record = z.record(z.string(), z.unknown());
export const TAGS = ["sandboxes"];

export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === "23505" || /UNIQUE constraint failed/i.test(e.message ?? "");
}

/** cpu_millicores wins over vcpus; each is derived from the other when only one is given. */
export function cpuOf(
  b: { vcpus?: number; cpu_millicores?: number },
  current?: { vcpus: number; cpu_millicores: number },
): { vcpus: number; cpu_millicores: number } {
  if (b.cpu_millicores !== undefined)
    return { cpu_millicores: b.cpu_millicores, vcpus: Math.max(1, Math.ceil(b.cpu_millicores / 1000)) };
  if (b.vcpus !== undefined) return { vcpus: b.vcpus, cpu_millicores: b.vcpus * 1000 };
  return current ?? { vcpus: DEFAULTS.vcpus, cpu_millicores: DEFAULTS.vcpus * 1000 };
}

/** Reads do not count as activity (a client polling status must not keep a sandbox awake); changes do. */
export function sandboxLoader(ctx: PlatformContext, manager: SandboxManager) {
  return async (workspaceId: string, name: string, activity = true): Promise<SandboxRow> => {
    const row = await findSandbox(ctx.db, workspaceId, name);
    if (!row) throw notFound("Sandbox");
    if (activity) manager.touch(row.id);
    return row;
  };
}
