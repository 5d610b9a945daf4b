import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import type { Locator } from "playwright-core";
import { createConsoleFeature } from "../../src/console/index.ts";
import { createDeploymentsFeature } from "../../src/deployments/feature.ts";
import { allFeatures } from "../../src/platform/features.ts";
import { FAST } from "../deployments/support.ts";
import { startTestPlatform } from "../support/platform.ts";
import { seriousFindings } from "./support/axe.ts";
import { ensureConsoleBuilt, launchBrowser, screenshotDir, VIEWPORTS } from "./support/browser.ts";

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "studio-agent");
/**
 * How long a run may take to reach its interrupt or its end: a second on an idle machine, several
 * on a loaded CI machine running other test files; these waits end as soon as the page shows it.
 */
const RUN_MS = 90_000;

/**
 * The Studio and the first-time-user path in Chromium, against a platform that deploys a real JS
 * graph (a subgraph, an interrupt, a conditional edge): every step through the page, timed, at
 * 1280×800 and again at 390×844, with axe-core on every page and no browser console error.
 */
test(
  "the console's Studio and first-time-user path in a browser, desktop and phone",
  { timeout: 600_000 },
  async (t) => {
    const browser = await launchBrowser(t);
    if (!browser) return;
    ensureConsoleBuilt();
    const features = allFeatures().filter((f) => f.name === "identity" || f.name === "secrets");
    // The page waits up to 5 minutes for the build (see below): the platform must not give up first.
    features.push(
      createDeploymentsFeature({ ...FAST, buildTimeoutMs: 300_000, deployTimeoutMs: 120_000 }),
      createConsoleFeature(),
    );
    const p = await startTestPlatform(t, { features, logLevel: "info" });
    if (!p) return;
    const project = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-studio-"));
    t.after(() => fs.rmSync(project, { recursive: true, force: true }));
    fs.cpSync(FIXTURE, project, { recursive: true });
    console.log(`screenshots: ${screenshotDir()}`);
    // The platform's log (its proxy's and the revision's lines) next to the screenshots, for a failed run.
    t.after(() => fs.writeFileSync(path.join(screenshotDir(), "studio-platform.log"), p.logs()));

    /** The newest lines of the live revision's deploy log (its agent server's output), oldest first. */
    const serverLog = async () => {
      const d = (await (await p.api(`/v2/deployments/${deploymentId}`)).json()) as { latest_revision_id: string };
      const page = (await (
        await p.api(`/v2/deployments/${deploymentId}/revisions/${d.latest_revision_id}/deploy_logs?limit=40&order=desc`)
      ).json()) as { logs: Array<{ timestamp: string; level: string; message: string }> };
      return page.logs
        .reverse()
        .map((l) => `  ${l.timestamp} ${l.level} ${l.message}`)
        .join("\n");
    };
    const figures: string[] = [];
    const a11y: string[] = [];
    let deploymentId = "";

    for (const [label, viewport] of VIEWPORTS) {
      await t.test(`at ${label} size (${viewport.width}×${viewport.height})`, async (t2) => {
        const context = await browser.newContext({ viewport });
        const page = await context.newPage();
        const problems: string[] = [];
        // Every console error counts here: a signed-out visit and a normal flow log none.
        page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
        page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
        // The console's line for a failed request has no URL: this one says which request and why.
        page.on("response", (r) => {
          if (r.status() >= 500)
            void r.text().then(
              (body) => problems.push(`${r.status()} ${r.request().method()} ${r.url()}: ${body.slice(0, 300)}`),
              () => problems.push(`${r.status()} ${r.request().method()} ${r.url()}`),
            );
        });
        const timed = async (name: string, fn: () => Promise<void>) => {
          const started = Date.now();
          await t2.test(name, fn);
          figures.push(`${label} ${name}: ${Date.now() - started} ms`);
        };
        /** Waits for a run's outcome on the page; a timeout says what the page shows instead. */
        const shown = (locator: Locator) =>
          locator.waitFor({ timeout: RUN_MS }).catch(async (err: Error) => {
            const errors = (await page.locator(".error").allInnerTexts()).join(" | ") || "no error shown";
            throw new Error(
              `not shown within ${RUN_MS} ms; the page: ${errors}; problems so far: ${problems.join(" | ") || "none"}; the revision's server said:\n${await serverLog()}`,
              { cause: err },
            );
          });
        const shot = (name: string) =>
          page.screenshot({ path: path.join(screenshotDir(), `studio-${name}-${label}.png`) });
        const audit = async (where: string) => {
          const found = await seriousFindings(page);
          for (const f of found)
            a11y.push(`${label} ${where}: ${f.id} (${f.impact}) ${f.help} at ${f.targets.join(", ")}`);
        };
        const noOverflow = async (where: string) => {
          const wide = await page.evaluate(() => document.documentElement.scrollWidth);
          assert.ok(wide <= viewport.width + 1, `${where} is ${wide} px wide at ${viewport.width} px`);
        };

        await timed("signed-out visit: sign-in page with a main landmark", async () => {
          await page.goto(p.url + "/console/");
          await page.locator("main input[name=credential]").waitFor();
          await audit("sign-in");
          await shot("01-sign-in");
          await page.fill("input[name=credential]", p.apiKey);
          await page.click("button[type=submit]");
          await page.getByRole("heading", { name: "Deployments" }).waitFor();
        });

        if (!deploymentId) {
          await timed("a new deployment is not shown ready while its revision builds", async () => {
            const res = await p.api("/v2/deployments", {
              method: "POST",
              json: {
                name: "studio-demo",
                source: "internal_source",
                source_config: {},
                source_revision_config: { langgraph_config_path: "langgraph.json", local_path: project },
              },
            });
            assert.equal(res.status, 201);
            deploymentId = ((await res.json()) as { id: string }).id;
            await page.reload();
            const pill = page.locator("table.list tr", { hasText: "studio-demo" }).locator("[data-status]").first();
            await pill.waitFor();
            const first = await pill.getAttribute("data-status");
            assert.notEqual(first, "READY", "nothing serves yet");
            console.log(`fresh deployment's pill: ${first} (${await pill.innerText()})`);
            await page.locator("table.list tr", { hasText: "studio-demo" }).getByText("Uploaded project").waitFor();
            // A JS build takes seconds on an idle machine; minutes on a loaded one.
            await page
              .locator("table.list tr", { hasText: "studio-demo" })
              .locator("[data-status=READY]")
              .waitFor({ timeout: 300_000 })
              .catch(async (err: Error) => {
                const d = (await (await p.api(`/v2/deployments/${deploymentId}`)).json()) as {
                  latest_revision_id: string;
                };
                const rev = await (
                  await p.api(`/v2/deployments/${deploymentId}/revisions/${d.latest_revision_id}`)
                ).text();
                throw new Error(`the deployment did not become ready: ${rev}`, { cause: err });
              });
            assert.equal(
              await page.locator("table.list tr", { hasText: "studio-demo" }).locator(".status").innerText(),
              "Ready",
              "pills in one case",
            );
          });
        }

        await timed("deployment page: source in words, status from revisions", async () => {
          await page.goto(`${p.url}/console/#/deployments/${deploymentId}`);
          await page.locator(".facts dd", { hasText: "Uploaded project" }).waitFor();
          await page.locator("[data-testid=deployment-status] [data-status=READY]").waitFor();
          await page.locator("[data-testid=revision-status] [data-status=DEPLOYED]").waitFor();
          await audit("deployment");
          await shot("02-deployment");
        });

        await timed("Studio: the graph drawn, its subgraph expanded", async () => {
          await page.getByRole("link", { name: "Open in Studio" }).click();
          // The first request to a revision that just went live can be slow on a loaded machine.
          await page
            .locator("[data-node=research]")
            .waitFor({ timeout: 90_000 })
            .catch(async (err: Error) => {
              throw new Error(
                `no graph: ${(await page.locator(".error").allInnerTexts()).join(" | ") || "no error shown"}`,
                { cause: err },
              );
            });
          for (const node of ["__start__", "plan", "write", "review", "publish", "__end__"])
            await page.locator(`[data-node="${node}"]`).waitFor();
          await page.getByRole("button", { name: "Expand research" }).click();
          await page.locator('[data-node="research:search"]').waitFor();
          await page.locator('[data-node="research:summarize"]').waitFor();
          await audit("studio");
          await noOverflow("studio");
          await shot("03-studio-graph");
        });

        await timed("Studio: run, the running node highlighted, an interrupt", async () => {
          await page.fill("textarea[name=run_input]", JSON.stringify({ topic: `whales ${label}` }));
          await page.getByRole("button", { name: "Run", exact: true }).click();
          await shown(page.locator('[data-node="research:search"][data-state=running]'));
          await shot("04-studio-running");
          await shown(page.locator("[data-testid=interrupt-value]", { hasText: "Publish the draft?" }));
          await page.locator('[data-node="review"][data-state=next]').waitFor();
          assert.match(
            await page.locator("[data-testid=interrupt-value]").innerText(),
            new RegExp(`text on whales ${label} from 4 notes`),
          );
          await page.waitForURL(/#\/studio\/[0-9a-f-]{36}\/[0-9a-f-]{36}$/);
          await page.locator("[data-testid=interrupt-value]").waitFor();
          await audit("studio-interrupt");
          await shot("05-studio-interrupt");
        });

        await timed("Studio: inspect a step's state and writes", async () => {
          const steps = page.locator("ol.steps li button");
          await steps.first().waitFor();
          assert.ok((await steps.count()) >= 5, `${await steps.count()} steps`);
          await page.locator("ol.steps li button", { hasText: "→ research" }).click();
          const state = page.locator("[data-testid=step-state]");
          await state.waitFor();
          assert.match(await state.innerText(), /plan: whales/);
          assert.doesNotMatch(await state.innerText(), /"draft"/, "before the write step there is no draft");
          await shot("06-studio-step");
        });

        await timed("Studio: edit the state and fork from that checkpoint", async () => {
          await page.locator("ol.steps li button", { hasText: "→ review" }).last().click();
          await page.getByRole("button", { name: "Edit state" }).click();
          const box = page.locator("textarea[name=state_values]");
          const values = JSON.parse(await box.inputValue()) as Record<string, unknown>;
          values.draft = "edited by hand";
          await box.fill(JSON.stringify(values, null, 2));
          await page.getByRole("button", { name: "Fork from here" }).click();
          await shown(page.locator("[data-testid=interrupt-value]", { hasText: "edited by hand" }));
          await shot("07-studio-forked");
        });

        await timed("Studio: resume the interrupt with a Command", async () => {
          await page.getByRole("button", { name: "A command" }).click();
          await page.fill("textarea[name=resume]", "{ not json");
          await page.getByRole("button", { name: "Resume" }).click();
          await page.locator(".interrupt .field-error", { hasText: "JSON object" }).waitFor();
          await page.fill("textarea[name=resume]", JSON.stringify({ resume: "yes" }));
          await page.getByRole("button", { name: "Resume" }).click();
          await shown(page.locator("[data-testid=run-status]", { hasText: "finished" }));
          // The node may sit outside the drawing's view on a small screen: its state is what counts.
          await page.locator('[data-node="publish"][data-state=visited]').waitFor({ state: "attached" });
          assert.match(await page.locator("[data-testid=step-state]").innerText(), /"published": true/);
          assert.match(await page.locator("[data-testid=step-state]").innerText(), /edited by hand/);
          await shot("08-studio-resumed");
        });

        await timed("Studio: replay from a checkpoint", async () => {
          await page.locator("ol.steps li button", { hasText: "→ write" }).first().click();
          await page.getByRole("button", { name: "Replay from here" }).click();
          await shown(page.locator("[data-testid=interrupt-value]", { hasText: "Publish the draft?" }));
          assert.match(
            await page.locator("[data-testid=interrupt-value]").innerText(),
            /text on whales/,
            "the replay wrote the draft again from that checkpoint",
          );
          assert.doesNotMatch(
            await page.locator("[data-testid=interrupt-value]").innerText(),
            /edited by hand/,
            "not the fork's draft",
          );
        });

        await timed("Studio: the assistant's context edited from its schema, used by the next run", async () => {
          await page.getByRole("tab", { name: "Assistant" }).click();
          const ctx = page.locator("textarea[name=assistant_context]");
          await ctx.waitFor();
          await page.getByText(/context schema has: tone/).waitFor();
          await ctx.fill(JSON.stringify({ tone: `friendly-${label}` }));
          await page.getByRole("button", { name: "Save assistant" }).click();
          await page.locator(".assistant-pane", { hasText: "version" }).waitFor();
          await audit("studio-assistant");
          await page.selectOption("select[name=thread]", { label: "New thread" });
          await page.getByRole("tab", { name: "Run and steps" }).click();
          await page.fill("textarea[name=run_input]", JSON.stringify({ topic: "tides" }));
          await page.getByRole("button", { name: "Run", exact: true }).click();
          await shown(page.locator("[data-testid=interrupt-value]", { hasText: `friendly-${label} text on tides` }));
        });

        await timed(
          "playground: threads titled readably, composer labelled, end-user mode waits for a token",
          async () => {
            await page.goto(`${p.url}/console/#/playground/${deploymentId}`);
            await page.locator(".threads li .preview", { hasText: "tides" }).first().waitFor();
            await page.getByLabel("Message", { exact: true }).waitFor();
            await page.selectOption("select[name=auth_mode]", "custom");
            await page.getByText("Type the end user's token").waitFor();
            await page.waitForTimeout(300);
            assert.equal(await page.locator(".error").count(), 0, "no request before a token is typed");
            await page.getByRole("button", { name: "Show" }).click();
            await page.fill("input[name=auth_token]", "Bearer not-a-real-user");
            assert.equal(
              await page.locator("input[name=auth_token]").getAttribute("type"),
              "text",
              "the typed token can be checked",
            );
            // A token the project's auth refuses: the page says so. Those 401s are this step's point.
            const before = problems.length;
            await page.press("input[name=auth_token]", "Enter");
            await page
              .locator(".error", { hasText: /401|nauthori|token/i })
              .first()
              .waitFor();
            problems.splice(
              before,
              problems.length - before,
              ...problems.slice(before).filter((m) => !/status of 401/.test(m)),
            );
            await audit("playground");
            await noOverflow("playground");
            await shot("09-playground");
          },
        );

        await timed("keys: the key in use shows when it was last used", async () => {
          await page.goto(`${p.url}/console/#/settings`);
          const row = page.locator("table.list tr", { hasText: "bootstrap" }).first();
          await row.waitFor();
          // "Last used" is a secondary column, folded away on a phone.
          await row.locator("time").first().waitFor({ state: "attached" });
          // The secret form: its inputs start at the form's left edge, not pushed right.
          const form = await page.locator("form[aria-label='Set secret']").boundingBox();
          const input = await page.locator("input[name=secret_key]").boundingBox();
          assert.ok(input!.x - form!.x < 40, `the first input starts ${input!.x - form!.x} px into the form`);
          await audit("settings");
          await shot("10-settings");
        });

        assert.deepEqual(problems, [], "no browser console error in the flow");
        await context.close();
      });
    }
    console.log(`step times:\n  ${figures.join("\n  ")}`);
    assert.deepEqual(a11y, [], "axe-core: no serious or critical finding");
  },
);
