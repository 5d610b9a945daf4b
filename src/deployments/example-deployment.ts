import fs from "node:fs";
import path from "node:path";
import type { Settings } from "../config/index.ts";
import type { PlatformContext } from "../platform/context.ts";
import { bootstrapKeyPath } from "../platform/bootstrap.ts";
import { WHARF_ROOT } from "./layout.ts";

const EXAMPLE = path.join(WHARF_ROOT, "examples/chat-agent");

/** The folder `wharf up` deploys as the example, or null when off. */
export function exampleProject(settings: Settings): string | null {
  const project = settings.WHARF_EXAMPLE_PROJECT ?? EXAMPLE;
  return project === "off" ? null : path.resolve(project);
}

/**
 * Folders `local_path` may name: the operator's WHARF_DEPLOY_LOCAL_ROOTS, and the example project
 * (the platform deploys it itself, with no setting needed; it is the operator's choice too).
 */
export function localSourceRoots(settings: Settings): string[] {
  const example = exampleProject(settings);
  return example ? [...settings.WHARF_DEPLOY_LOCAL_ROOTS, example] : settings.WHARF_DEPLOY_LOCAL_ROOTS;
}

/**
 * `wharf up` (not `startPlatform`) deploys the example agent through the same path as any deployment (a deployment named
 * `example` from `WHARF_EXAMPLE_PROJECT`, default examples/chat-agent), once: later starts just
 * serve its DEPLOYED revision again. Off with `WHARF_EXAMPLE_PROJECT=off` (test platforms set it).
 */
export async function ensureExampleDeployment(ctx: PlatformContext): Promise<void> {
  const project = exampleProject(ctx.config.settings);
  if (!project) return;
  const keyFile = bootstrapKeyPath(ctx.config.home);
  if (!fs.existsSync(keyFile) || !fs.existsSync(path.join(project, "langgraph.json"))) return;
  const key = fs.readFileSync(keyFile, "utf8").trim();
  const api = async (p: string, init: { method?: string; json?: unknown } = {}) => {
    const res = await fetch(ctx.baseUrl() + p, {
      method: init.method ?? "GET",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
    });
    return { status: res.status, body: (await res.json().catch(() => null)) as Record<string, any> };
  };
  const list = await api("/v2/deployments?name_contains=example&limit=100");
  if (list.status !== 200) return;
  let d = (list.body.resources as Array<Record<string, any>>).find((x) => x.name === "example");
  if (!d) {
    const created = await api("/v2/deployments", {
      method: "POST",
      json: {
        name: "example",
        source: "internal_source",
        source_config: { deployment_type: "dev" },
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: project },
        secrets: [],
      },
    });
    if (created.status !== 201) {
      ctx.log.warn(
        { status: created.status, detail: created.body?.detail },
        "the example deployment could not be created",
      );
      return;
    }
    d = created.body;
  }
  const url = d.source_config.custom_url as string;
  const revision = d.latest_revision_id as string | null;
  ctx.log.info({ deployment: d.id, url }, "example deployment");
  if (!revision) return;
  for (let i = 0; i < 600; i++) {
    const r = await api(`/v2/deployments/${d.id}/revisions/${revision}`);
    if (r.status !== 200) return;
    if (r.body.status === "DEPLOYED") break;
    if (/FAILED|SKIPPED|INTERRUPTED/.test(r.body.status)) {
      ctx.log.warn(
        { status: r.body.status, message: r.body.status_message },
        "the example deployment failed; see `wharf deployments logs example`",
      );
      return;
    }
    await new Promise((res) => setTimeout(res, 250));
  }
  const auth =
    project === EXAMPLE ? `-H "Authorization: Bearer demo-token-alice" ` : `-H "X-Api-Key: $(cat ${keyFile})" `;
  const graph = project === EXAMPLE ? "agent" : "<graph id>";
  process.stdout.write(
    `\nExample agent deployed (deployment "example") at ${url}\n` +
      `Try: curl -s ${auth}-H 'content-type: application/json' ${url}/runs/wait -d '{"assistant_id":"${graph}","input":{"messages":[{"role":"human","content":"hi"}]}}'\n\n`,
  );
}
