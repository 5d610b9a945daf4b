import type { Command } from "commander";

/** The flags every command that talks to the server accepts. */
export function addConnectionOptions(cmd: Command): Command {
  return cmd
    .option("--url <url>", "control plane URL (default WHARF_URL or http://WHARF_HOST:WHARF_PORT)")
    .option("--api-key <key>", "API key (default WHARF_API_KEY or $WHARF_HOME/bootstrap-key)")
    .option("--tenant <workspace_id>", "act on another of your workspaces (X-Tenant-Id)");
}

export function printTable(rows: Array<Record<string, string>>): void {
  if (rows.length === 0) {
    console.log("(none)");
    return;
  }
  const cols = Object.keys(rows[0]);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((s, i) => s.padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  console.log(line(cols.map((c) => c.toUpperCase())));
  for (const r of rows) console.log(line(cols.map((c) => r[c] ?? "")));
}
