import { sql, type RawBuilder } from "kysely";

/**
 * Names of PostgreSQL advisory locks. Several Wharf schemas may share one database, so every name
 * includes the store's schema (`current_schema()` of the connection that asks); locks are
 * database-wide, names are not.
 */

/** The single-key lock `wharf.<name>.<schema>` (e.g. one sandbox admission at a time). */
export function advisoryKey(name: string): RawBuilder<number> {
  return sql<number>`hashtext(${`wharf.${name}.`} || current_schema())`;
}

/**
 * The two-key lock (`<space>`, `<id>`): one lock per id within a space of this schema (e.g. one
 * per platform process). PostgreSQL shows it in `pg_locks` as classid, objid with objsubid 2.
 */
export function advisoryPair(space: string, id: string): { space: RawBuilder<number>; id: RawBuilder<number> } {
  return { space: advisoryKey(space), id: sql<number>`hashtext(${id})` };
}

/** Whether some session of this database holds the two-key lock (`pg_locks`, no lock taken to look). */
export function pairHeld(space: RawBuilder<number>, id: RawBuilder<number>, bySession?: "this"): RawBuilder<boolean> {
  const who = bySession === "this" ? sql`and l.pid = pg_backend_pid()` : sql``;
  return sql<boolean>`exists (
    select 1 from pg_catalog.pg_locks l
     where l.locktype = 'advisory' and l.granted and l.objsubid = 2
       and l.database = (select oid from pg_catalog.pg_database where datname = current_database())
       and l.classid = (${space})::oid and l.objid = (${id})::oid ${who})`;
}
