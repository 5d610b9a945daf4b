import type { Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import type { Database } from "../store/schema.ts";

/**
 * A table whose rows hold values sealed with the master key. Features that store encrypted columns
 * register one so that a key rotation re-encrypts them too.
 */
export interface SealedColumn {
  table: string;
  keyColumns: string[];
  keyIdColumn: string;
  cipherColumn: string;
  aad(row: Record<string, unknown>): string;
}

const sealedColumns: SealedColumn[] = [
  {
    table: "secrets",
    keyColumns: ["workspace_id", "key"],
    keyIdColumn: "key_id",
    cipherColumn: "ciphertext",
    aad: (row) => `workspace-secret:${row.workspace_id}:${row.key}`,
  },
];

export function registerSealedColumn(column: SealedColumn): void {
  if (!sealedColumns.some((c) => c.table === column.table && c.cipherColumn === column.cipherColumn)) sealedColumns.push(column);
}

/**
 * The common case: a row identified by `workspace_id` and `id` whose value is sealed with
 * associated data `aadOf(workspace_id, id)`.
 */
export function registerRowSealedColumn(table: string, keyIdColumn: string, cipherColumn: string, aadOf: (workspaceId: string, id: string) => string): void {
  registerSealedColumn({ table, keyColumns: ["workspace_id", "id"], keyIdColumn, cipherColumn, aad: (row) => aadOf(String(row.workspace_id), String(row.id)) });
}

export function registeredSealedColumns(): readonly SealedColumn[] {
  return sealedColumns;
}

/**
 * Re-seals every registered value not yet under the active key (every registered table exists:
 * migrations are applied whole, whichever features run). Each row is updated only if it
 * still holds the ciphertext we read (compare-and-set), so a concurrent write is never overwritten.
 */
export async function resealAll(db: Kysely<Database>, box: SecretBox): Promise<{ resealed: number; keyIdsInUse: Set<string> }> {
  // Kysely<any>: the tables are registered at run time by features.
  const anyDb = db as unknown as Kysely<any>;
  let resealed = 0;
  const inUse = new Set<string>([box.activeKeyId]);
  for (const col of sealedColumns) {
    const rows = await anyDb.selectFrom(col.table).select([...col.keyColumns, col.keyIdColumn, col.cipherColumn]).where(col.keyIdColumn, "!=", box.activeKeyId).execute();
    for (const row of rows) {
      const plaintext = box.open({ keyId: row[col.keyIdColumn], blob: row[col.cipherColumn] }, col.aad(row));
      const sealed = box.seal(plaintext, col.aad(row));
      let q = anyDb.updateTable(col.table).set({ [col.keyIdColumn]: sealed.keyId, [col.cipherColumn]: sealed.blob }).where(col.cipherColumn, "=", row[col.cipherColumn]);
      for (const k of col.keyColumns) q = q.where(k, "=", row[k]);
      const res = await q.executeTakeFirst();
      resealed += Number(res.numUpdatedRows);
    }
    const left = await anyDb.selectFrom(col.table).select(col.keyIdColumn).distinct().execute();
    for (const r of left) inUse.add(r[col.keyIdColumn]);
  }
  return { resealed, keyIdsInUse: inUse };
}
