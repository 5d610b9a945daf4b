import type { Command } from "commander";
import { loadConfig } from "../config/index.ts";
import { rotateMasterKey } from "../secrets/key-rotation.ts";
import { openStore } from "../store/database.ts";
import { migrateToLatest } from "../store/migrate.ts";
import { CliError, callApi, connectionFromEnv } from "./api-client.ts";
import { addConnectionOptions, printTable } from "./output.ts";

async function readValue(value: string | undefined, fromStdin: boolean): Promise<string> {
  if (fromStdin || value === undefined) {
    if (process.stdin.isTTY && value === undefined && !fromStdin)
      throw new CliError("give a value, or --stdin to read it from standard input");
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8").replace(/\n$/, "");
  }
  return value;
}

export function registerSecrets(program: Command): void {
  const secrets = program.command("secrets").description("manage workspace secrets (values are write-only)");
  addConnectionOptions(
    secrets
      .command("set <key> [value]")
      .description("create or replace a secret; without a value, reads standard input"),
  )
    .option("--stdin", "read the value from standard input (keeps it out of shell history)")
    .action(async (key: string, value: string | undefined, opts) => {
      const v = await readValue(value, Boolean(opts.stdin));
      await callApi(connectionFromEnv(opts), "PUT", "/v2/secrets", [{ key, value: v }]);
      console.log(`set ${key}`);
    });
  addConnectionOptions(secrets.command("list").description("list secret names and timestamps")).action(async (opts) => {
    const rows = await callApi<Array<{ key: string; created_at: string; updated_at: string }>>(
      connectionFromEnv(opts),
      "GET",
      "/v2/secrets",
    );
    printTable(rows.map((r) => ({ key: r.key, created: r.created_at, updated: r.updated_at })));
  });
  addConnectionOptions(secrets.command("rm <key>").description("delete a secret")).action(async (key: string, opts) => {
    await callApi(connectionFromEnv(opts), "DELETE", `/v2/secrets/${encodeURIComponent(key)}`);
    console.log(`deleted ${key}`);
  });
  secrets
    .command("rotate-key")
    .description(
      "make a new master key active and re-encrypt every sealed value of every feature under it (runs on the server's machine, against its storage, while the server runs)",
    )
    .option("--keep-old", "keep retired keys in $WHARF_HOME/master.key even when no row uses them")
    .action(async (opts) => {
      const config = loadConfig();
      if (config.masterKey)
        console.log(
          "WHARF_MASTER_KEY is set: its first key is the active one; re-encrypting under it (put a new key first and restart the server to rotate).",
        );
      const store = await openStore({ databaseUrl: config.databaseUrl, home: config.home });
      try {
        await migrateToLatest(store);
        const result = await rotateMasterKey(store.db, {
          home: config.home,
          masterKey: config.masterKey,
          keepOld: Boolean(opts.keepOld),
          say: (l) => console.log(l),
        });
        if (result.unreadable.length) process.exitCode = 1;
      } finally {
        await store.close();
      }
    });
}
