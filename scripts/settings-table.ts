/**
 * Prints the README's configuration table from src/config/settings.ts; with --write, replaces the
 * table in README.md between its markers.
 *   node bin/run-ts.js scripts/settings-table.ts [--write]
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { settingsTable, withSettingsTable } from "../src/config/index.ts";

const readme = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "README.md");
if (process.argv.includes("--write")) fs.writeFileSync(readme, withSettingsTable(fs.readFileSync(readme, "utf8")));
else process.stdout.write(settingsTable() + "\n");
