import {
  DEFAULT_MIGRATION_LOCK_TABLE,
  DEFAULT_MIGRATION_TABLE,
  PostgresDialect,
  sql,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type DatabaseMetadataOptions,
  type Kysely,
  type SchemaMetadata,
  type TableMetadata,
} from "kysely";

interface ColumnRow {
  table: string;
  table_type: string;
  schema: string;
  column: string;
  type: string;
  type_schema: string;
  not_null: boolean;
  has_default: boolean;
  description: string | null;
  serial: string | null;
}

/**
 * Kysely's own PostgreSQL introspector scans the tables of every schema in the database and
 * resolves each by name (`has_schema_privilege`, `pg_get_serial_sequence`). Another tenant's schema
 * dropped between the scan and the lookup then fails our migration (`invalid_schema_name`), and a
 * table of the same name elsewhere can be mistaken for ours. A Wharf store owns one schema (the
 * connection's `current_schema()`), so its introspection looks at that schema alone.
 */
class OwnSchemaIntrospector implements DatabaseIntrospector {
  constructor(private readonly db: Kysely<unknown>) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(this.db);
    return rows.map((r) => ({ name: r.name }));
  }

  async getTables(options: DatabaseMetadataOptions = { withInternalKyselyTables: false }): Promise<TableMetadata[]> {
    const hideKysely = options.withInternalKyselyTables
      ? sql``
      : sql`and c.relname not in (${DEFAULT_MIGRATION_TABLE}, ${DEFAULT_MIGRATION_LOCK_TABLE})`;
    const { rows } = await sql<ColumnRow>`
      select c.relname as table, c.relkind as table_type, ns.nspname as schema, a.attname as column,
             typ.typname as type, dtns.nspname as type_schema, a.attnotnull as not_null, a.atthasdef as has_default,
             col_description(a.attrelid, a.attnum) as description,
             pg_get_serial_sequence(quote_ident(ns.nspname) || '.' || quote_ident(c.relname), a.attname) as serial
        from pg_catalog.pg_attribute a
        join pg_catalog.pg_class c on a.attrelid = c.oid
        join pg_catalog.pg_namespace ns on c.relnamespace = ns.oid
        join pg_catalog.pg_type typ on a.atttypid = typ.oid
        join pg_catalog.pg_namespace dtns on typ.typnamespace = dtns.oid
       where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p')
         and a.attnum >= 0 and not a.attisdropped ${hideKysely}
       order by c.relname, a.attnum`.execute(this.db);
    return tablesOf(rows);
  }

  async getMetadata(options?: DatabaseMetadataOptions): Promise<DatabaseMetadata> {
    return { tables: await this.getTables(options) };
  }
}

function tablesOf(rows: ColumnRow[]): TableMetadata[] {
  const tables = new Map<string, TableMetadata & { columns: TableMetadata["columns"][number][] }>();
  for (const r of rows) {
    let table = tables.get(r.table);
    if (!table)
      tables.set(r.table, (table = { name: r.table, schema: r.schema, isView: r.table_type === "v", columns: [] }));
    table.columns.push({
      name: r.column,
      dataType: r.type,
      dataTypeSchema: r.type_schema,
      isNullable: !r.not_null,
      hasDefaultValue: r.has_default,
      isAutoIncrementing: r.serial !== null,
      comment: r.description ?? undefined,
    });
  }
  return [...tables.values()];
}

export class OwnSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new OwnSchemaIntrospector(db);
  }
}
