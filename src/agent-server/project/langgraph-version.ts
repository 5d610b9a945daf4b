import fs from "node:fs";
import path from "node:path";

/** The `@langchain/langgraph` lines this server runs graphs of (its checkpoint and message formats). */
export const SUPPORTED_LANGGRAPH = ">=1.0.0 <2.0.0";

/**
 * Why a project's `@langchain/langgraph` version cannot be served, or null when it can. Older
 * lines (0.x) write checkpoints without the fields this server reads and messages the wire
 * cannot serialise, so a run would answer `{}` or a 500 instead of failing clearly.
 */
export function langGraphVersionProblem(version: string): string | null {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  if (!m) return `@langchain/langgraph version "${version}" is not a version number`;
  const major = Number(m[1]);
  if (major >= 1 && major < 2) return null;
  return `@langchain/langgraph ${version} is not supported; this server runs ${SUPPORTED_LANGGRAPH} (npm install @langchain/langgraph@^1)`;
}

/** The `@langchain/langgraph` a module at `file` imports: the nearest `node_modules` copy up from it, as Node resolves it. */
export function findLangGraphPackage(file: string): { version: string; packageJson: string } | null {
  for (let dir = path.dirname(path.resolve(file)); ; dir = path.dirname(dir)) {
    const packageJson = path.join(dir, "node_modules", "@langchain", "langgraph", "package.json");
    if (fs.existsSync(packageJson)) {
      try {
        return {
          version: String((JSON.parse(fs.readFileSync(packageJson, "utf8")) as { version?: unknown }).version ?? ""),
          packageJson,
        };
      } catch (err) {
        throw new Error(`cannot read ${packageJson}`, { cause: err });
      }
    }
    if (path.dirname(dir) === dir) return null;
  }
}

/** Throws one line naming the supported range when a JS graph of the project would load an unsupported `@langchain/langgraph`. */
export function assertSupportedLangGraph(graphFiles: string[]): void {
  for (const file of graphFiles) {
    const found = findLangGraphPackage(file);
    const problem = found && langGraphVersionProblem(found.version);
    if (problem) throw new Error(`${problem} (found ${found.packageJson})`);
  }
}
