import { sql, type Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import type { Database } from "../store/schema.ts";
import { aadOf, columnsOf, SEALED_LOCATIONS, type SealedLocation } from "./sealed-columns.ts";

export type { SealedLocation } from "./sealed-columns.ts";

/** Rows re-sealed per query; small enough that a running server's writes interleave. */
export const RESEAL_BATCH = 200;

type AnyRow = Record<string, unknown>;
interface SealedValue {
  keyId: string;
  blob: string;
}

/** One row of a location that could not be re-sealed (it does not open, or its JSON is unreadable). */
export interface UnreadableRow {
  location: string;
  row: string;
  reason: string;
}

export interface ResealResult {
  resealed: number;
  unreadable: UnreadableRow[];
  /** Every key id some row still uses after the pass, the active one included. */
  keyIdsInUse: Set<string>;
}

// Kysely<any>: the registry names tables of every feature, typed in their own modules.
const untyped = (db: Kysely<Database>) => db as unknown as Kysely<any>;

const describeRow = (loc: SealedLocation, r: AnyRow) => loc.keyColumns.map((c) => `${c}=${String(r[c])}`).join(",");

function sealedIn(loc: SealedLocation, r: AnyRow): { value: SealedValue | null; json?: AnyRow } {
  if (loc.kind === "column") {
    const keyId = r[loc.keyIdColumn];
    const blob = r[loc.cipherColumn];
    return { value: typeof keyId === "string" && typeof blob === "string" ? { keyId, blob } : null };
  }
  const json = JSON.parse(String(r[loc.jsonColumn])) as AnyRow;
  const v = json?.[loc.field] as SealedValue | null | undefined;
  return { value: v && typeof v.keyId === "string" && typeof v.blob === "string" ? v : null, json };
}

/** Reads one location in key order, `RESEAL_BATCH` rows at a time (keyset pagination). */
async function* batchesOf(
  db: Kysely<Database>,
  loc: SealedLocation,
  onlyNotUnder: string | null,
): AsyncGenerator<AnyRow[]> {
  let after: unknown[] | null = null;
  for (;;) {
    let q = untyped(db).selectFrom(loc.table).select(columnsOf(loc));
    if (loc.kind === "column") {
      q = q.where(loc.keyIdColumn, "is not", null);
      if (onlyNotUnder) q = q.where(loc.keyIdColumn, "!=", onlyNotUnder);
    } else {
      q = q.where(loc.jsonColumn, "like", `%"${loc.field}":{%`);
    }
    if (after) {
      const cols = sql.join(loc.keyColumns.map((c) => sql.ref(c)));
      q = q.where(sql<boolean>`(${cols}) > (${sql.join(after)})`);
    }
    for (const c of loc.keyColumns) q = q.orderBy(c);
    const rows = (await q.limit(RESEAL_BATCH).execute()) as AnyRow[];
    if (rows.length === 0) return;
    yield rows;
    if (rows.length < RESEAL_BATCH) return;
    const last = rows[rows.length - 1];
    after = loc.keyColumns.map((c) => last[c]);
  }
}

/**
 * Kept only so that a module still calling it compiles: the registry is static now
 * (src/secrets/sealed-columns.ts), and this checks that the column is listed there.
 * @deprecated add the column to SEALED_LOCATIONS instead.
 */
export function registerSealedColumn(column: { table: string; cipherColumn: string }): void {
  const listed = SEALED_LOCATIONS.some(
    (l) => l.kind === "column" && l.table === column.table && l.cipherColumn === column.cipherColumn,
  );
  if (!listed)
    throw new Error(
      `sealed column ${column.table}.${column.cipherColumn} is missing from src/secrets/sealed-columns.ts`,
    );
}

/** @deprecated as `registerSealedColumn`: add the column to SEALED_LOCATIONS instead. */
export function registerRowSealedColumn(table: string, _keyIdColumn: string, cipherColumn: string): void {
  registerSealedColumn({ table, cipherColumn });
}

/** Re-seals one row under the active key; compare-and-set on the stored ciphertext, so a concurrent write wins. */
async function resealRow(db: Kysely<Database>, box: SecretBox, loc: SealedLocation, r: AnyRow): Promise<number> {
  const { value, json } = sealedIn(loc, r);
  if (!value || value.keyId === box.activeKeyId) return 0;
  const aad = aadOf(loc, r);
  const fresh = box.seal(box.open(value, aad), aad);
  let q;
  if (loc.kind === "column") {
    q = untyped(db)
      .updateTable(loc.table)
      .set({ [loc.keyIdColumn]: fresh.keyId, [loc.cipherColumn]: fresh.blob })
      .where(loc.cipherColumn, "=", value.blob);
  } else {
    const text = JSON.stringify({ ...json, [loc.field]: fresh });
    q = untyped(db)
      .updateTable(loc.table)
      .set({ [loc.jsonColumn]: text })
      .where(loc.jsonColumn, "=", r[loc.jsonColumn]);
  }
  for (const k of loc.keyColumns) q = q.where(k, "=", r[k]);
  const res = await q.executeTakeFirst();
  return Number(res.numUpdatedRows);
}

/**
 * Re-seals every value of every registered location that is not under the active key. Rows that
 * do not open are left as they are and reported; the rest of the pass goes on.
 */
export async function resealAll(
  db: Kysely<Database>,
  box: SecretBox,
  locations: readonly SealedLocation[] = SEALED_LOCATIONS,
): Promise<ResealResult> {
  let resealed = 0;
  const unreadable: UnreadableRow[] = [];
  for (const loc of locations) {
    for await (const rows of batchesOf(db, loc, box.activeKeyId)) {
      for (const r of rows) {
        try {
          resealed += await resealRow(db, box, loc, r);
        } catch (err) {
          unreadable.push({ location: loc.name, row: describeRow(loc, r), reason: (err as Error).message });
        }
      }
    }
  }
  const usage = await scanKeyUsage(db, locations);
  return { resealed, unreadable, keyIdsInUse: new Set([box.activeKeyId, ...usage.keys()]) };
}

/** A row that still holds a value under some key: where it is, for the operator. */
export interface KeyUse {
  location: string;
  row: string;
}

/**
 * Which key ids the stored values use, read from every row of every location (the proof needed
 * before a key may be dropped). Each key maps to the rows under it, at most `sample` per location.
 */
export async function scanKeyUsage(
  db: Kysely<Database>,
  locations: readonly SealedLocation[] = SEALED_LOCATIONS,
  sample = 20,
): Promise<Map<string, KeyUse[]>> {
  const uses = new Map<string, KeyUse[]>();
  for (const loc of locations) {
    const perKey = new Map<string, number>();
    for await (const rows of batchesOf(db, loc, null)) {
      for (const r of rows) {
        let keyId: string | undefined;
        try {
          keyId = sealedIn(loc, r).value?.keyId;
        } catch {
          // Unparseable JSON holds no sealed value we could open either; it cannot pin a key.
          continue;
        }
        if (!keyId) continue;
        const n = perKey.get(keyId) ?? 0;
        perKey.set(keyId, n + 1);
        const list = uses.get(keyId) ?? [];
        uses.set(keyId, list);
        if (n < sample) list.push({ location: loc.name, row: describeRow(loc, r) });
      }
    }
  }
  return uses;
}
