import path from "node:path";
import type { Logger } from "../../log/logger.ts";

/** One built file of a graph's UI bundle (`entrypoint.js`, `entrypoint.css`). */
/** The global a UI bundle defines: a JS identifier even for names such as `agent-alias` (as the LangGraph server names it). */
export function uiGlobalName(agentName: string): string {
  return `__LGUI_${agentName.replace(/[^a-zA-Z0-9]/g, "_")}`;
}

export interface UiFile {
  basename: string;
  contents: Uint8Array;
}

/**
 * What the LangGraph server wraps around a project's UI module: the components render into the
 * shadow root the client (`LoadExternalComponent` of `@langchain/langgraph-sdk/react-ui`) prepared.
 */
const RENDER_TEMPLATE = `
const STORE_SYMBOL = Symbol.for("LGUI_EXT_STORE");
function createRenderer(components) {
  return (name, shadowRootId) => {
    const root = document.getElementById(shadowRootId).shadowRoot;
    const renderEl = document.createElement("div");
    root.appendChild(renderEl);
    window[STORE_SYMBOL].respond(shadowRootId, components[name], renderEl);
  };
}
`;

/** The client provides React and the SDK to the bundle through this global, not `require`. */
const requireShim = (text: string) =>
  text.replaceAll(
    `typeof require !== "undefined" ? require`,
    `typeof globalThis[Symbol.for("LGUI_REQUIRE")] !== "undefined" ? globalThis[Symbol.for("LGUI_REQUIRE")]`,
  );

/** Bundles one graph's UI module with esbuild, as the LangGraph server does (React and the SDK external). */
async function bundle(agentName: string, file: string): Promise<UiFile[]> {
  const { build } = await import("esbuild");
  const dir = path.dirname(file);
  const result = await build({
    write: false,
    outdir: path.join(dir, "dist"),
    entryPoints: ["entrypoint"],
    bundle: true,
    platform: "browser",
    target: "es2020",
    jsx: "automatic",
    logLevel: "silent",
    external: ["react", "react-dom", "@langchain/langgraph-sdk", "@langchain/langgraph-sdk/react-ui"],
    globalName: uiGlobalName(agentName),
    plugins: [
      {
        name: "entrypoint",
        setup(b) {
          b.onResolve({ filter: /^entrypoint$/ }, () => ({
            path: path.join(dir, "ui.entrypoint.tsx"),
            namespace: "entrypoint-ns",
          }));
          b.onLoad({ filter: /.*/, namespace: "entrypoint-ns" }, () => ({
            resolveDir: dir,
            contents: [
              `import ui from ${JSON.stringify(file)}`,
              RENDER_TEMPLATE,
              "export const render = createRenderer(ui)",
            ].join("\n"),
            loader: "tsx",
          }));
        },
      },
    ],
  });
  return (result.outputFiles ?? []).map((f) => {
    const basename = path.basename(f.path);
    return {
      basename,
      contents: basename.endsWith(".js") ? new TextEncoder().encode(requireShim(f.text)) : f.contents,
    };
  });
}

/**
 * Builds every UI of `langgraph.json` `ui` at start. A UI that does not build is logged with its
 * file and the error and left out; the graphs still serve.
 */
export async function buildUiBundles(ui: Record<string, string>, log: Logger): Promise<Map<string, UiFile[]>> {
  const out = new Map<string, UiFile[]>();
  for (const [agent, file] of Object.entries(ui)) {
    try {
      out.set(agent, await bundle(agent, file));
    } catch (err) {
      log.error({ agent, file, err }, `ui "${agent}" (${file}) did not build; it is not served`);
    }
  }
  return out;
}
