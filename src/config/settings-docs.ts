import { SETTINGS, type SettingDeclaration } from "./settings.ts";

const entries = () => Object.entries(SETTINGS) as Array<[string, SettingDeclaration]>;
const defaultOf = (d: SettingDeclaration) =>
  d.defaultText ?? (d.default === undefined || d.default === "" ? "none" : `\`${d.default}\``);
const plain = (s: string) => s.replace(/`/g, "");

/** The settings for `wharf up --help`, grouped by the part that uses them. */
export function settingsHelp(): string {
  const lines: string[] = [];
  let part = "";
  for (const [name, d] of entries()) {
    if (d.part !== part) {
      part = d.part;
      lines.push(`\n  ${part}:`);
    }
    lines.push(`    ${name.padEnd(38)} ${plain(d.description)} (${d.type}; default ${plain(defaultOf(d))})`);
  }
  return "Settings (environment variables):" + lines.join("\n");
}

export const TABLE_BEGIN = "<!-- settings table: generated from src/config/settings.ts -->";
export const TABLE_END = "<!-- end of settings table -->";

/** The README's configuration table, between its markers. */
export function settingsTable(): string {
  const rows = entries().map(
    ([name, d]) => `| \`${name}\` | ${d.part} | ${d.type} | ${defaultOf(d)} | ${d.description.replace(/\|/g, "\\|")} |`,
  );
  return [
    TABLE_BEGIN,
    "",
    "| variable | part | type | default | meaning |",
    "|---|---|---|---|---|",
    ...rows,
    "",
    TABLE_END,
  ].join("\n");
}

/** `text` with the table between the markers replaced by the current one. */
export function withSettingsTable(text: string): string {
  const a = text.indexOf(TABLE_BEGIN);
  const b = text.indexOf(TABLE_END);
  if (a < 0 || b < a) throw new Error("the settings table markers are missing");
  return text.slice(0, a) + settingsTable() + text.slice(b + TABLE_END.length);
}
