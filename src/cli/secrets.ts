import fs from "node:fs";
import type { Command } from "commander";
import { loadConfig } from "../config/config.ts";
import { addActiveKey, loadKeyring, reloadKeyring, retainOnlyKeys } from "../crypto/keyring.ts";
import { SecretBox } from "../crypto/secret-box.ts";
import { resealAll } from "../secrets/rotate-master-key.ts";
import { openStore } from "../store/database.ts";
import { migrateToLatest } from "../store/migrate.ts";
import { CliError, callApi, connectionFromEnv } from "./api-client.ts";
import { addConnectionOptions, printTable } from "./output.ts";

async function readValue(value: string | undefined, fromStdin: boolean): Promise<string> {
  if (fromStdin || value === undefined) {
    if (process.stdin.isTTY && value === undefined && !fromStdin) throw new CliError("give a value, or --stdin to read it from standard input");
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8").replace(/\n$/, "");
  }
  return value;
}

export function registerSecrets(program: Command): void {
  const secrets = program.command("secrets").description("manage workspace secrets (values are write-only)");
  addConnectionOptions(secrets.command("set <key> [value]").description("create or replace a secret; without a value, reads standard input"))
    .option("--stdin", "read the value from standard input (keeps it out of shell history)")
    .action(async (key: string, value: string | undefined, opts) => {
      const v = await readValue(value, Boolean(opts.stdin));
      await callApi(connectionFromEnv(opts), "PUT", "/v2/secrets", [{ key, value: v }]);
      console.log(`set ${key}`);
    });
  addConnectionOptions(secrets.command("list").description("list secret names and timestamps")).action(async (opts) => {
    const rows = await callApi<Array<{ key: string; created_at: string; updated_at: string }>>(connectionFromEnv(opts), "GET", "/v2/secrets");
    printTable(rows.map((r) => ({ key: r.key, created: r.created_at, updated: r.updated_at })));
  });
  addConnectionOptions(secrets.command("rm <key>").description("delete a secret")).action(async (key: string, opts) => {
    await callApi(connectionFromEnv(opts), "DELETE", `/v2/secrets/${encodeURIComponent(key)}`);
    console.log(`deleted ${key}`);
  });
  secrets
    .command("rotate-key")
    .description("make a new master key active and re-encrypt every stored secret under it (runs on the server's machine, against its storage)")
    .option("--keep-old", "keep retired keys in $WHARF_HOME/master.key")
    .action(async (opts) => {
      const config = loadConfig();
      if (config.masterKey) {
        console.log("WHARF_MASTER_KEY is set: put the new key first in it (comma-separated, old keys after), restart, then run this to re-encrypt.");
      } else {
        loadKeyring(config.home, null);
        const ring = addActiveKey(config.home);
        console.log(`new active master key ${ring.activeId}`);
      }
      const store = await openStore({ databaseUrl: config.databaseUrl, home: config.home });
      try {
        await migrateToLatest(store);
        const box = new SecretBox(loadKeyring(config.home, config.masterKey), () => reloadKeyring(config.home, config.masterKey));
        const { resealed, keyIdsInUse } = await resealAll(store.db, box);
        console.log(`re-encrypted ${resealed} value(s) under ${box.activeKeyId}`);
        if (!config.masterKey && !opts.keepOld && fs.existsSync(config.home)) retainOnlyKeys(config.home, keyIdsInUse);
      } finally {
        await store.close();
      }
    });
}
