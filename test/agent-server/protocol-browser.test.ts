import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { build } from "esbuild";
import fs from "node:fs";
import { chromium } from "playwright-core";
import { CHROMIUM } from "../console/support/browser.ts";
import { requireCapability } from "../support/requirements.ts";
import { startTestAgentServer } from "./support.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const PROJECT = path.join(here, "fixtures/protocol");
const PAGE = path.join(here, "fixtures/protocol-page/page.ts");

/**
 * `@langchain/react`'s `useStream` in headless Chromium against Wharf: a small page bundled with
 * esbuild, served on the agent server's own origin (Playwright answers `/__page`), streams a run
 * over the protocol (SSE by default, then WebSocket) and shows its messages.
 */
test("protocol in a browser: @langchain/react useStream over SSE and WebSocket", { timeout: 120_000 }, async (t) => {
  if (
    !requireCapability(
      t,
      fs.existsSync(CHROMIUM),
      `browser tests need Chromium at ${CHROMIUM} (apt-get install chromium)`,
    )
  )
    return;
  // The page is answered by Playwright, so Chromium knows no address for it and would count its
  // WebSocket to loopback as a public page reaching into the local network: that check is off.
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-features=LocalNetworkAccessChecks"],
  });
  t.after(() => browser.close());
  const server = await startTestAgentServer(t, { project: PROJECT });
  if (!server) return;
  const bundle = await build({
    entryPoints: [PAGE],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    define: { "process.env.NODE_ENV": '"production"' },
    logLevel: "silent",
  });
  const js = bundle.outputFiles[0].text;
  const context = await browser.newContext();
  await context.addCookies([{ name: "token", value: "user-alice", url: server.url }]);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(e.message));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  await page.route(`${server.url}/__page*`, (route) =>
    route.fulfill({
      contentType: "text/html",
      body: `<!doctype html><html><body><div id="root"></div><script type="module" src="/__page.js"></script></body></html>`,
    }),
  );
  await page.route(`${server.url}/__page.js`, (route) => route.fulfill({ contentType: "text/javascript", body: js }));
  for (const transport of ["sse", "websocket"]) {
    const used = new Set<string>();
    page.on("request", (r) => used.add(`${r.method()} ${new URL(r.url()).pathname.replace(/[0-9a-f-]{36}/g, ":id")}`));
    page.on("websocket", (ws) => used.add(`WS ${new URL(ws.url()).pathname.replace(/[0-9a-f-]{36}/g, ":id")}`));
    await page.goto(`${server.url}/__page?transport=${transport}`);
    await page.click("#send");
    try {
      await page.locator("#messages li", { hasText: "answer: found hello" }).waitFor({ timeout: 20_000 });
    } catch (err) {
      throw new Error(
        `${transport}: ${await page.locator("body").innerHTML()} | ${[...used].join(", ")} | ${problems.join("; ")}`,
        { cause: err },
      );
    }
    await page.locator("#messages li", { hasText: "from the subgraph" }).waitFor({ timeout: 20_000 });
    await page.locator("#loading", { hasText: "idle" }).waitFor({ timeout: 20_000 });
    assert.equal(await page.locator("#error").innerText(), "", transport);
    const types = await page.locator("#messages li").evaluateAll((els) => els.map((e) => e.getAttribute("data-type")));
    assert.deepEqual(types, ["human", "ai", "tool", "ai", "ai"], transport);
    // SSE: commands over HTTP, events on their own requests; WebSocket: both on the socket.
    const wanted =
      transport === "sse"
        ? ["POST /threads/:id/commands", "POST /threads/:id/stream/events"]
        : ["WS /threads/:id/stream/events"];
    for (const w of wanted) assert.ok(used.has(w), `${transport}: ${[...used].join(", ")}`);
  }
  assert.deepEqual(problems, []);
});
