import { sql, type Expression, type Kysely, type Selectable, type SqlBool } from "kysely";
import type { SecretBox } from "../../crypto/secret-box.ts";
import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import type { SandboxesTable, SandboxSnapshotsTable } from "./sandbox-tables.ts";
import type { SandboxStatus } from "../api/schemas.ts";
import "./sandbox-tables.ts";

export type SandboxRow = Selectable<SandboxesTable>;
export type SnapshotRow = Selectable<SandboxSnapshotsTable>;

const UUIDISH = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const envAad = (workspaceId: string, id: string) => `sandbox-env:${workspaceId}:${id}`;

export function sealEnv(
  box: SecretBox,
  workspaceId: string,
  id: string,
  env: Record<string, string> | undefined,
): { env_key_id: string | null; env_ciphertext: string | null } {
  if (!env || Object.keys(env).length === 0) return { env_key_id: null, env_ciphertext: null };
  const s = box.seal(JSON.stringify(env), envAad(workspaceId, id));
  return { env_key_id: s.keyId, env_ciphertext: s.blob };
}

export function openEnv(box: SecretBox, row: SandboxRow): Record<string, string> {
  if (!row.env_key_id || !row.env_ciphertext) return {};
  return JSON.parse(
    box.open({ keyId: row.env_key_id, blob: row.env_ciphertext }, envAad(row.workspace_id, row.id)),
  ) as Record<string, string>;
}

/** A sandbox of the workspace by name, or by id (the API accepts both). */
export async function findSandbox(
  db: Kysely<Database>,
  workspaceId: string,
  nameOrId: string,
): Promise<SandboxRow | undefined> {
  const byName = await db
    .selectFrom("sandboxes")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("name", "=", nameOrId)
    .executeTakeFirst();
  if (byName || !UUIDISH.test(nameOrId)) return byName;
  return db
    .selectFrom("sandboxes")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("id", "=", nameOrId)
    .executeTakeFirst();
}

export async function getSandbox(db: Kysely<Database>, id: string): Promise<SandboxRow | undefined> {
  return db.selectFrom("sandboxes").selectAll().where("id", "=", id).executeTakeFirst();
}

/** Sandboxes in these states; in replica mode (`owner` given) only those this replica runs. */
export async function sandboxesInStatus(
  db: Kysely<Database>,
  statuses: SandboxStatus[],
  owner?: string,
): Promise<SandboxRow[]> {
  let q = db.selectFrom("sandboxes").selectAll().where("status", "in", statuses);
  if (owner !== undefined) q = q.where("owner_replica", "=", owner);
  return q.execute();
}

/** The owners of the sandboxes among `ids` that still have a row (replica mode), by id. */
export async function ownersOfSandboxes(db: Kysely<Database>, ids: string[]): Promise<Map<string, string | null>> {
  if (!ids.length) return new Map();
  const rows = await db.selectFrom("sandboxes").select(["id", "owner_replica"]).where("id", "in", ids).execute();
  return new Map(rows.map((r) => [r.id, r.owner_replica ?? null]));
}

/** The replica that runs a sandbox (replica mode), or null. */
export async function ownerOfSandbox(db: Kysely<Database>, id: string): Promise<string | null> {
  const row = await db.selectFrom("sandboxes").select("owner_replica").where("id", "=", id).executeTakeFirst();
  return row?.owner_replica ?? null;
}

/**
 * Running sandboxes of replicas whose lease ran out: their processes went with the replica, so
 * they are reported `error` (a conditional update: several replicas may sweep at once). The runtime
 * reference stays, so the owner, if it comes back, ends what is left of them (`reconcile`).
 */
export async function markLostSandboxes(db: Kysely<Database>, deadReplicas: string[]): Promise<number> {
  if (deadReplicas.length === 0) return 0;
  const now = nowIso();
  const res = await db
    .updateTable("sandboxes")
    .set({
      status: "error",
      status_message:
        "The replica that ran this sandbox stopped renewing its lease (it died or lost the database); its processes are gone. Delete it",
      status_changed_at: now,
      updated_at: now,
    })
    .where("owner_replica", "in", deadReplicas)
    .where("status", "in", ["provisioning", "ready"])
    .executeTakeFirst();
  return Number(res.numUpdatedRows);
}

/**
 * Moves a sandbox between states only if it is still in one of `from`: concurrent requests (or
 * platform processes) cannot both win a transition. Returns the updated row, or undefined.
 */
export async function transition(
  db: Kysely<Database>,
  id: string,
  from: SandboxStatus[],
  to: SandboxStatus,
  extra: Partial<Pick<SandboxRow, "status_message" | "runtime" | "stopped_at">> = {},
): Promise<SandboxRow | undefined> {
  const now = nowIso();
  const res = await db
    .updateTable("sandboxes")
    .set({ status: to, status_message: null, status_changed_at: now, updated_at: now, ...extra })
    .where("id", "=", id)
    .where("status", "in", from)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) return undefined;
  return getSandbox(db, id);
}

export async function listSnapshots(
  db: Kysely<Database>,
  workspaceId: string,
  q: { name_contains?: string; limit: number; offset: number },
): Promise<SnapshotRow[]> {
  let query = db.selectFrom("sandbox_snapshots").selectAll().where("workspace_id", "=", workspaceId);
  if (q.name_contains) query = query.where(nameContains(q.name_contains));
  return query.orderBy("created_at", "desc").orderBy("id", "desc").limit(q.limit).offset(q.offset).execute();
}

export async function findSnapshot(
  db: Kysely<Database>,
  workspaceId: string,
  idOrName: string,
): Promise<SnapshotRow | undefined> {
  if (UUIDISH.test(idOrName)) {
    const byId = await db
      .selectFrom("sandbox_snapshots")
      .selectAll()
      .where("workspace_id", "=", workspaceId)
      .where("id", "=", idOrName)
      .executeTakeFirst();
    if (byId) return byId;
  }
  const [name, tag] = idOrName.includes(":") ? idOrName.split(":", 2) : [idOrName, "latest"];
  return db
    .selectFrom("sandbox_snapshots")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("name", "=", name)
    .where("tag", "=", tag)
    .executeTakeFirst();
}

/** `name LIKE %text%` with the wildcards in `text` taken literally, on both dialects. */
export function nameContains(text: string): Expression<SqlBool> {
  const pattern = `%${text.replace(/[%_\\]/g, (m) => `\\${m}`)}%`;
  return sql<SqlBool>`name like ${pattern} escape '\\'`;
}
