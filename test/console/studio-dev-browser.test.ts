import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { startAgentServer } from "../../src/agent-server/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import { seriousFindings } from "./support/axe.ts";
import { ensureConsoleBuilt, launchBrowser, screenshotDir } from "./support/browser.ts";

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "studio-agent");

/** `wharf dev`'s server (open, on loopback) serves the Studio for its project at `/console/`. */
test(
  "wharf dev's server: the Studio at /console/ runs the project's graph and resumes its interrupt",
  { timeout: 120_000 },
  async (t) => {
    const browser = await launchBrowser(t);
    if (!browser) return;
    ensureConsoleBuilt();
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-studio-dev-"));
    // Served in place, as `wharf dev` serves a checkout: its imports resolve from the repository's modules.
    const server = await startAgentServer({
      projectDir: FIXTURE,
      host: "127.0.0.1",
      port: 0,
      databaseUrl: null,
      home: path.join(home, "state"),
      open: true,
      log: createLogger({ level: "warn" }),
    });
    t.after(async () => {
      await server.stop();
      fs.rmSync(home, { recursive: true, force: true });
    });
    const res = await fetch(`${server.url}/console/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-security-policy") ?? "", /script-src 'self'/);

    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    const problems: string[] = [];
    page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
    page.on("pageerror", (e) => problems.push(e.message));
    const started = Date.now();
    await page.goto(`${server.url}/console/`);
    await page.getByRole("heading", { name: "Studio" }).waitFor();
    await page.locator("[data-node=research]").waitFor();
    const drawn = Date.now() - started;
    assert.equal(await page.locator("select[name=deployment]").count(), 0, "one project: no deployment to choose");
    await page.fill("textarea[name=run_input]", JSON.stringify({ topic: "dev loop" }));
    await page.getByRole("button", { name: "Run", exact: true }).click();
    await page.locator("[data-node=research][data-state=running]").waitFor({ timeout: 30_000 });
    await page
      .locator("[data-testid=interrupt-value]", { hasText: "plain text on dev loop" })
      .waitFor({ timeout: 30_000 });
    await page.fill("textarea[name=resume]", "yes");
    await page.getByRole("button", { name: "Resume" }).click();
    await page.locator("[data-testid=run-status]", { hasText: "finished" }).waitFor({ timeout: 30_000 });
    assert.match(await page.locator("[data-testid=step-state]").innerText(), /"published": true/);
    await page.screenshot({ path: path.join(screenshotDir(), "studio-dev-desktop.png") });
    console.log(
      `wharf dev Studio: graph drawn ${drawn} ms after navigation; run, interrupt and resume ${Date.now() - started - drawn} ms`,
    );
    assert.deepEqual(await seriousFindings(page), []);
    assert.deepEqual(problems, [], "no browser console error");
  },
);
