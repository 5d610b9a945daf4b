import { sql, type Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import { deploymentDatabaseNames } from "./database-access.ts";

/**
 * The hard side of a deployment role's `statement_timeout` and `idle_in_transaction_session_timeout`:
 * the role may lift its own defaults (`SET statement_timeout = 0` is allowed to any role), so the
 * platform cancels every statement of its deployments' roles that has run longer than the limit,
 * and ends their sessions left idle inside a transaction for longer (a cancel does nothing to an
 * idle session; its locks and snapshot go only with it). The platform's role may: it is a superuser
 * or a member of each deployment role. Only this platform's deployments (a shared server may hold
 * others'). Returns how many statements and sessions were stopped.
 */
export async function cancelOverdueStatements(db: Kysely<Database>, limitSeconds: number): Promise<number> {
  const roles = (await db.selectFrom("deployments").select("id").execute()).map(
    (d) => deploymentDatabaseNames(d.id).role,
  );
  if (roles.length === 0) return 0;
  const { rows } = await sql<{ stopped: boolean }>`
    select case when state = 'active' then pg_cancel_backend(pid) else pg_terminate_backend(pid) end as stopped from pg_stat_activity
    where usename = any(${roles}::text[]) and (
      (state = 'active' and query_start < now() - make_interval(secs => ${limitSeconds}))
      or (state in ('idle in transaction', 'idle in transaction (aborted)') and state_change < now() - make_interval(secs => ${limitSeconds})))`.execute(
    db,
  );
  return rows.filter((r) => r.stopped).length;
}
