import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import type { Page } from "playwright-core";
import { createDeploymentsFeature } from "../../src/deployments/index.ts";
import { allFeatures } from "../../src/platform/features.ts";
import { createSandboxesFeature } from "../../src/sandboxes/feature.ts";
import { copyProject, FAKE_RUNNER, FAST, pollRevision } from "../deployments/support.ts";
import { BASE_CACHE } from "../sandboxes/support.ts";
import { startTestPlatform, type TestPlatform } from "../support/platform.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { ensureConsoleBuilt, launchBrowser } from "./support/browser.ts";

/**
 * The attacker's page: with the victim's console session it reads the CSRF token from the console
 * and creates an API key in the victim's workspace. It names the console's origin outright, so it
 * tries from its own origin too.
 */
const attackPage = (consoleOrigin: string) => `<!doctype html><title>loading</title><script>
(async () => {
  const s = await (await fetch(${JSON.stringify(consoleOrigin)} + "/console/api/session", { credentials: "include" })).json();
  const r = await fetch(${JSON.stringify(consoleOrigin)} + "/v2/api-keys", { method: "POST", credentials: "include", headers: { "content-type": "application/json", "x-wharf-csrf": s.csrf_token }, body: JSON.stringify({ name: "stolen" }) });
  document.title = r.status === 201 ? "stole a key" : "refused " + r.status;
})().catch((e) => { document.title = "blocked: " + e; });
</script><p>nothing to see</p>`;

/** A service that serves the attack page on every path; on /fix it also tries to fix the victim's session. */
const SERVICE = `import http.server
page = open("/home/user/attack.html", "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        if self.path.startswith("/fix"):
            self.send_header("Set-Cookie", "wharf_session=fixed-by-the-service; Path=/")
        self.end_headers()
        self.wfile.write(page)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
`;

async function call(p: TestPlatform, key: string, route: string, json: unknown): Promise<Record<string, any>> {
  const res = await p.api(route, { method: "POST", json, headers: { "x-api-key": key } });
  const body = (await res.json()) as Record<string, any>;
  if (res.status >= 300) throw new Error(`${route}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** Opens a URL as the victim would (a link) and gives the page's script time to act. */
async function visit(page: Page, url: string): Promise<string> {
  const download = page.waitForEvent("download", { timeout: 15_000 }).catch(() => null);
  try {
    await page.goto(url, { timeout: 15_000 });
  } catch (err) {
    // A download (an attachment) is no page: nothing ran. It is let finish before the page closes.
    if (!/net::ERR_ABORTED|Download is starting/.test((err as Error).message)) throw err;
    await (await download)?.path();
    return "downloaded";
  }
  // Paid once for all links (they are opened together), so it can be generous for a loaded machine.
  await page.waitForFunction(() => document.title !== "loading", null, { timeout: 5000 }).catch(() => undefined);
  return page.title();
}

/**
 * Finding: tenant content on the console's origin. A signed-in console user opens links to bytes
 * another workspace controls (a download link, a sandbox service, a deployment's route): none of
 * them may act as that user, and none may replace the user's session cookie.
 */
test("tenant content in Chromium cannot act as the signed-in console user", { timeout: 480_000 }, async (t) => {
  if (
    !requireCapability(
      t,
      process.platform === "linux" && isRoot(),
      "sandboxes need root on Linux (namespaces, overlayfs, cgroups)",
    )
  )
    return;
  const browser = await launchBrowser(t);
  if (!browser) return;
  ensureConsoleBuilt();
  const features = allFeatures()
    .filter((f) => f.name !== "sandboxes" && f.name !== "deployments")
    .concat(
      createSandboxesFeature({ WHARF_SANDBOX_BASE_CACHE: BASE_CACHE, WHARF_SANDBOX_TICK_MS: "100" }),
      createDeploymentsFeature({ ...FAST, ...FAKE_RUNNER, buildTimeoutMs: 300_000, deployTimeoutMs: 120_000 }),
    );
  const p = (await startTestPlatform(t, { features, logLevel: "info" }))!;
  if (!p) return;
  const port = new URL(p.url).port;

  // The attacker: a workspace of their own, a sandbox and a deployment in it.
  const ws = await call(p, p.apiKey, "/v2/workspaces", { name: "attacker" });
  const attacker = (
    (await (
      await p.api("/v2/api-keys", { method: "POST", json: { name: "attacker" }, headers: { "x-tenant-id": ws.id } })
    ).json()) as { key: string }
  ).key;
  const box = await call(p, attacker, "/v2/sandboxes/boxes", { name: "attacker-box" });
  const exec = (command: string) =>
    fetch(`${box.dataplane_url}/execute`, {
      method: "POST",
      headers: { "x-api-key": attacker, "content-type": "application/json" },
      body: JSON.stringify({ command, timeout: 30 }),
    }).then((r) => r.json());
  const page = attackPage(p.url);
  await exec(
    `cat > /home/user/attack.html <<'EOF'\n${page}\nEOF\ncat > /home/user/svc.py <<'EOF'\n${SERVICE}EOF\ncd /home/user && nohup python3 svc.py >/dev/null 2>&1 & for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done`,
  );
  const download = await call(p, attacker, `/v2/sandboxes/boxes/attacker-box/download-url`, {
    path: "attack.html",
    content_type: "text/html",
    content_disposition: "inline",
  });
  const service = await call(p, attacker, `/v2/sandboxes/boxes/attacker-box/service-url`, { port: 8000 });
  const project = copyProject(t, "echo");
  fs.writeFileSync(path.join(project, "page.html"), page);
  // Custom auth that lets anyone in: the attacker's page needs no credential of the victim's.
  fs.writeFileSync(
    path.join(project, "auth.ts"),
    "export const auth = { authenticate: () => ({ identity: 'anyone' }) };\n",
  );
  fs.writeFileSync(
    path.join(project, "langgraph.json"),
    JSON.stringify({ graphs: { echo: "./graph.ts:graph" }, auth: { path: "./auth.ts:auth" } }),
  );
  const dep = await call(p, attacker, "/v2/deployments", {
    name: "attacker",
    source: "internal_source",
    source_config: {},
    source_revision_config: { langgraph_config_path: "langgraph.json", local_path: project },
    secrets: [],
  });
  // A build takes seconds on an idle machine and can take minutes on a loaded 2-core CI machine.
  assert.equal(
    (await pollRevision(p, dep.id, dep.latest_revision_id, 300_000, { "x-api-key": attacker })).status,
    "DEPLOYED",
  );

  // The victim, signed in to the console (afresh for each link, in a context of its own: a replaced session would spoil the next).
  const victim = async () => {
    // Downloads complete (a cancelled one is another finding's: it must not decide this test).
    const context = await browser.newContext({ acceptDownloads: true });
    const tab = await context.newPage();
    await tab.goto(`${p.url}/console/`);
    await tab.fill("input[name=credential]", p.apiKey);
    await tab.click("button[type=submit]");
    await tab.getByRole("heading", { name: "Deployments" }).waitFor();
    const session = async () =>
      JSON.stringify((await context.cookies()).filter((c) => c.name === "wharf_session").map((c) => [c.value, c.path]));
    return { context, session, before: await session() };
  };

  const token = encodeURIComponent(service.token);
  const links: Array<[string, string]> = [
    ["download link", `${p.url}/sandboxes/download/${download.token}`],
    ["download link as handed out", download.download_url],
    ["service URL", `${p.url}/sandboxes/service/${box.id}/8000/attack.html?__wharf_service_token=${token}`],
    ["service browser_url as handed out", service.browser_url],
    ["service setting a cookie", `${p.url}/sandboxes/service/${box.id}/8000/fix?__wharf_service_token=${token}`],
    ["deployment route", `${p.url}/deployments/${dep.id}/page.html`],
    ["deployment route setting a cookie", `${p.url}/deployments/${dep.id}/fix.html`],
    ["deployment on its own host", `http://dep-${dep.id}.localhost:${port}/page.html`],
    ["deployment on its own host setting a cookie", `http://dep-${dep.id}.localhost:${port}/fix.html`],
  ];
  // Each link in a victim's own browser context, all at once: a page whose script never runs costs
  // the whole grace period, which is waited out once rather than once per link.
  const outcomes = await Promise.all(
    links.map(async ([what, url]) => {
      const v = await victim();
      const title = await visit(await v.context.newPage(), url);
      const replaced = (await v.session()) !== v.before;
      await v.context.close();
      return `${what}: ${title}${replaced ? " (session cookie replaced)" : ""}`;
    }),
  );
  console.log(outcomes.join("\n"));
  assert.deepEqual(
    outcomes.filter((o) => /: stole|replaced/.test(o)),
    [],
    "a tenant's page acted as the victim",
  );
  // On their own hosts the pages do run (only the console is out of their reach).
  for (const o of outcomes.filter((x) => /browser_url|own host/.test(x))) assert.match(o, /: blocked: TypeError/, o);
  const keys = (await (await p.api("/v2/api-keys")).json()) as Array<{ name: string }>;
  assert.deepEqual(
    keys.filter((k) => k.name === "stolen"),
    [],
    "no key was created in the victim's workspace",
  );

  // /docs, on the console's origin, works under its CSP and refuses to be framed.
  const docs = await (await browser.newContext()).newPage();
  const violations: string[] = [];
  docs.on("console", (m) => /Content Security Policy/i.test(m.text()) && violations.push(m.text()));
  const res = await docs.goto(`${p.url}/docs`);
  assert.equal(res?.headers()["x-frame-options"], "DENY");
  await docs.locator(".swagger-ui .info .title", { hasText: "Wharf control plane" }).waitFor({ timeout: 15_000 });
  assert.deepEqual(violations, []);
});
