/**
 * The console's playground against a deployed Python project, in headless Chromium: the answer of
 * a Python graph streams into the page token by token, and the thread is listed.
 */
import assert from "node:assert/strict";
import dns from "node:dns/promises";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { createDeploymentsFeature } from "../../src/deployments/feature.ts";
import { defaultRunnerCommand } from "../../src/deployments/runtime/agent-process.ts";
import { allFeatures } from "../../src/platform/features.ts";
import { FAST, logsOf, pollRevision } from "../deployments/support.ts";
import { startTestPlatform } from "../support/platform.ts";
import { isRoot, pythonAvailable, requireCapability } from "../support/requirements.ts";
import { ensureConsoleBuilt, launchBrowser, shoot } from "./support/browser.ts";

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "python-stream-agent");
const ANSWER = "Six times seven is 42, streamed token by token from Python.";

/** Where PyPI's names resolve on this machine (a mirror on a reserved network the operator allows). */
async function pypiMirror(): Promise<string> {
  const addrs = await Promise.all(
    ["pypi.org", "files.pythonhosted.org"].map((h) => dns.lookup(h, { all: true }).catch(() => [])),
  );
  return [...new Set(addrs.flat().map((a) => `${a.address}/${a.family === 6 ? 128 : 32}`))].join(",");
}

test("the console's playground chats with a Python deployment: tokens stream in", { timeout: 900_000 }, async (t) => {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "confined deployments need root on Linux"))
    return;
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects")) return;
  const browser = await launchBrowser(t);
  if (!browser) return;
  ensureConsoleBuilt();
  process.env.WHARF_EGRESS_ALLOW_INTERNAL = await pypiMirror();
  const features = allFeatures()
    .filter((f) => ["identity", "secrets", "egress", "console"].includes(f.name))
    .concat(
      createDeploymentsFeature({
        ...FAST,
        isolation: true,
        runnerCommand: defaultRunnerCommand,
        runnerBinds: [],
        buildTimeoutMs: 600_000,
        deployTimeoutMs: 120_000,
      }),
    );
  const p = (await startTestPlatform(t, { features, logLevel: "info" }))!;
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name: "python-chat",
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: FIXTURE },
      secrets: [],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = await res.json();
  const rev = await pollRevision(p, d.id, d.latest_revision_id, 600_000);
  assert.equal(rev.status, "DEPLOYED", `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}`);

  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  await page.goto(p.url + "/");
  await page.fill("input[name=credential]", p.apiKey);
  await page.click("button[type=submit]");
  await page.getByRole("heading", { name: "Deployments" }).waitFor();

  await page.goto(`${p.url}/console/#/playground/${d.id}`);
  await page.locator("input[name=message]").waitFor();
  await page.evaluate(() => {
    const seen: string[] = ((window as unknown as { seen: string[] }).seen = []);
    const root = document.querySelector("[data-testid=messages]")!;
    new MutationObserver(() => {
      const bubbles = root.querySelectorAll(".msg.ai .bubble");
      const last = bubbles[bubbles.length - 1]?.textContent ?? "";
      if (last && seen[seen.length - 1] !== last) seen.push(last);
    }).observe(root, { subtree: true, childList: true, characterData: true });
  });
  await page.fill("input[name=message]", "What is six times seven?");
  await page.getByRole("button", { name: "Send" }).click();
  await page.locator(".msg.ai .bubble", { hasText: ANSWER }).waitFor({ timeout: 60_000 });
  const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
  const partial = seen.filter((s) => s !== ANSWER && ANSWER.startsWith(s));
  assert.ok(partial.length >= 3, `the answer arrived in pieces: ${JSON.stringify(seen.slice(0, 5))}`);
  await page.locator(".threads li").first().waitFor();
  await shoot(page, "python-playground");
  assert.deepEqual(problems, []);
});
