import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import {
  ConfigError,
  loadConfig,
  readSetting,
  SETTINGS,
  SettingsError,
  withSettingsTable,
} from "../../src/config/index.ts";
import { REPO_ROOT, wharfCli } from "../support/process.ts";

describe("one configuration", () => {
  test("the README's table is the one generated from the declarations", () => {
    const readme = fs.readFileSync(path.join(REPO_ROOT, "README.md"), "utf8");
    assert.equal(withSettingsTable(readme), readme, "run: node bin/run-ts.js scripts/settings-table.ts --write");
  });

  test("wharf up --help lists every declared setting with its default", async () => {
    const { code, out } = await wharfCli(["up", "--help"]);
    assert.equal(code, 0, out);
    for (const [name, d] of Object.entries(SETTINGS)) {
      const line = out.split("\n").find((l) => l.trim().startsWith(name + " "));
      assert.ok(line, `${name} is in the help`);
      if (d.default) assert.ok(line.includes(`default ${d.default}`), `${name}'s default is in the help: ${line}`);
    }
  });

  test("defaults parse; bad values stop start-up naming every variable", () => {
    const c = loadConfig({});
    assert.equal(c.port, 8123);
    assert.equal(c.settings.WHARF_SANDBOX_KEEP_RUNNING, false);
    assert.deepEqual(c.settings.WHARF_EGRESS_ALLOW_INTERNAL, []);
    assert.equal(c.settings.WHARF_OAUTH_SWEEP_INTERVAL_SECONDS, 60);
    const bad: Record<string, string> = {
      WHARF_PORT: "70000",
      WHARF_LOG_LEVEL: "loud",
      DATABASE_URL: "mysql://x",
      WHARF_SANDBOX_DRIVER: "docker",
      WHARF_OAUTH_STATE_TTL_SECONDS: "5",
      WHARF_EGRESS_SYSTEM_DNS: "maybe",
    };
    assert.throws(
      () => loadConfig(bad),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        for (const name of Object.keys(bad)) assert.match(err.message, new RegExp(`\\b${name}:`));
        return true;
      },
    );
    assert.equal(loadConfig({ WHARF_PORT: "" }).port, 8123, "an empty variable is unset");
    assert.throws(() => readSetting("WHARF_URL", { WHARF_URL: "not a url" }), SettingsError);
  });

  test("every declaration has a description, a type and a part", () => {
    for (const [name, d] of Object.entries(SETTINGS)) {
      assert.match(name, /^(WHARF_[A-Z0-9_]+|DATABASE_URL|REDIS_URL)$/);
      assert.ok(d.description.length > 10 && d.type && d.part, name);
      assert.ok(d.default !== undefined || d.defaultText, `${name} says what happens when unset`);
    }
  });

  test("every WHARF_* variable the code names is declared (or is one the platform sets for its children)", () => {
    // Set by the platform for processes it starts, or constants named like settings: not operator settings.
    const internal = new Set([
      "WHARF_AGENT_DATABASE_URL",
      "WHARF_AGENT_DATABASE_SCHEMA",
      "WHARF_DEPLOYMENT_ID",
      "WHARF_REVISION_ID",
      "WHARF_WORKSPACE_ID",
      "WHARF_FSIZE_LIMIT",
      "WHARF_BIN",
      "WHARF_NODE_MODULES",
      "WHARF_ROOT",
      "WHARF_WORKER_CONFIG",
    ]);
    const src = path.join(REPO_ROOT, "src");
    const named = new Set<string>();
    for (const f of fs.readdirSync(src, { recursive: true }) as string[]) {
      if (!/\.(ts|mjs)$/.test(f)) continue;
      for (const m of fs.readFileSync(path.join(src, f), "utf8").matchAll(/\bWHARF_[A-Z0-9_]*[A-Z0-9]\b/g))
        named.add(m[0]);
    }
    const undeclared = [...named].filter((n) => !(n in SETTINGS) && !internal.has(n)).sort();
    assert.deepEqual(undeclared, [], "declare these in src/config/settings.ts");
  });

  test("no code in src/ reads process.env outside src/config", () => {
    // Settings come from src/config/settings.ts; what is handed to a child, and the host conventions
    // other tools share (PATH, LANG, LANGGRAPH_CONFIG), come from src/config/host-variables.ts.
    const src = path.join(REPO_ROOT, "src");
    const offenders: string[] = [];
    for (const f of (fs.readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"))) {
      const rel = path.posix.join("src", f.split(path.sep).join("/"));
      if (rel.startsWith("src/config/")) continue;
      fs.readFileSync(path.join(src, f), "utf8")
        .split("\n")
        .forEach((l, i) => {
          if (/process\.env\b/.test(l) && !/^\s*(\*|\/\/|\/\*)/.test(l)) offenders.push(`${rel}:${i + 1}: ${l.trim()}`);
        });
    }
    assert.deepEqual(
      offenders,
      [],
      "read settings from ctx.config.settings (declared in src/config/settings.ts), or the environment through src/config/host-variables.ts",
    );
  });
});
