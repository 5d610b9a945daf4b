import type { Command } from "commander";
import { callApi, connectionFromEnv } from "./api-client.ts";
import { addConnectionOptions, printTable } from "./output.ts";

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
  key?: string;
}

export function registerKeys(program: Command): void {
  const keys = program.command("keys").description("manage the workspace's API keys");
  addConnectionOptions(keys.command("create <name>").description("create an API key (printed once)"))
    .option("--expires-in <seconds>", "lifetime in seconds", (v) => Number(v))
    .action(async (name: string, opts) => {
      const row = await callApi<KeyRow>(connectionFromEnv(opts), "POST", "/v2/api-keys", {
        name,
        expires_in_seconds: opts.expiresIn ?? null,
      });
      console.log(`created ${row.id}\n${row.key}`);
    });
  addConnectionOptions(keys.command("list").description("list API keys (never the keys themselves)")).action(
    async (opts) => {
      const rows = await callApi<KeyRow[]>(connectionFromEnv(opts), "GET", "/v2/api-keys");
      printTable(
        rows.map((r) => ({
          id: r.id,
          name: r.name,
          prefix: r.prefix,
          created: r.created_at,
          revoked: r.revoked_at ?? "",
        })),
      );
    },
  );
  addConnectionOptions(keys.command("revoke <key_id>").description("revoke an API key")).action(
    async (id: string, opts) => {
      await callApi(connectionFromEnv(opts), "DELETE", `/v2/api-keys/${encodeURIComponent(id)}`);
      console.log(`revoked ${id}`);
    },
  );
}
