import type { AgentProcess } from "../runtime/agent-process.ts";
import { encodePrincipal, PRINCIPAL_HEADER } from "../runtime/principal-header.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { fetchUpstream } from "../api/upstream.ts";

export class HealthError extends Error {}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `GET /ok` until 200, failing at once if the process exits or the phase is aborted. */
export async function waitUntilUp(proc: AgentProcess, signal: AbortSignal, log: RevisionLog): Promise<void> {
  const started = performance.now();
  for (let attempt = 0; ; attempt++) {
    signal.throwIfAborted();
    if (!proc.running)
      throw new HealthError(`the agent server exited (code ${await proc.exited}) before answering GET /ok`);
    try {
      const res = await fetchUpstream(proc.url, "/ok", { signal, timeoutMs: 2000 });
      if (res.status === 200) {
        log.line(`GET /ok answered 200 after ${Math.round(performance.now() - started)} ms`);
        return;
      }
    } catch {
      /* not listening yet */
    }
    await sleep(Math.min(10 * 2 ** Math.min(attempt, 4), 100));
  }
}

export interface ReadinessOptions {
  workspaceId: string;
  hasCustomAuth: boolean;
  signal: AbortSignal;
  log: RevisionLog;
  timeoutMs: number;
  /** Opt-in: a real stateless run of every graph with this input (`source_config.smoke_input`). */
  smokeInput?: Record<string, unknown> | null;
}

/** The platform's own developer identity for readiness checks (`x-auth-scheme: langsmith`, as Studio). */
function headersFor(workspaceId: string) {
  return {
    [PRINCIPAL_HEADER]: encodePrincipal({
      userId: "wharf-deployments",
      workspaceId,
      scheme: "api_key",
      apiKeyId: null,
    }),
    "x-auth-scheme": "langsmith",
  };
}

/**
 * The LangGraph server's own readiness, without side effects: the server loaded every graph (it
 * answers only after that) and the assistants API lists each graph. Nothing runs unless the
 * deployment asks for a smoke input. A project whose custom auth refuses the developer identity
 * is its right: then /ok plus the build's load check are the evidence.
 */
export async function checkReady(proc: AgentProcess, graphs: string[], opts: ReadinessOptions): Promise<void> {
  const headers = headersFor(opts.workspaceId);
  for (const graph of graphs) {
    opts.signal.throwIfAborted();
    const res = await call(
      proc,
      "/assistants/search",
      { graph_id: graph, limit: 1 },
      headers,
      opts,
      `listing the assistants of graph ${graph}`,
    );
    if ((res.status === 401 || res.status === 403) && opts.hasCustomAuth) {
      opts.log.line(
        `graph ${graph}: the project's custom auth answered ${res.status} to the developer identity; relying on /ok and the build's load check`,
        "warning",
      );
      continue;
    }
    if (res.status !== 200)
      throw new HealthError(
        `POST /assistants/search for graph ${graph} answered ${res.status}: ${res.text.slice(0, 500)}`,
      );
    const list = parse(res.text);
    if (!Array.isArray(list) || list.length === 0)
      throw new HealthError(`graph ${graph} has no assistant: the agent server did not load it`);
    opts.log.line(`graph ${graph} is loaded (assistant ${(list[0] as { assistant_id?: string }).assistant_id ?? "?"})`);
  }
  if (opts.smokeInput) await smokeRuns(proc, graphs, opts, headers);
}

async function smokeRuns(
  proc: AgentProcess,
  graphs: string[],
  opts: ReadinessOptions,
  headers: Record<string, string>,
): Promise<void> {
  for (const graph of graphs) {
    const started = performance.now();
    const res = await call(
      proc,
      "/runs/wait",
      { assistant_id: graph, input: opts.smokeInput },
      headers,
      opts,
      `smoke run of graph ${graph}`,
    );
    if ((res.status === 401 || res.status === 403) && opts.hasCustomAuth) continue;
    if (res.status !== 200)
      throw new HealthError(`smoke run of graph ${graph} answered ${res.status}: ${res.text.slice(0, 500)}`);
    const error = (parse(res.text) as { __error__?: { error?: string; message?: string } } | null)?.__error__;
    if (error)
      throw new HealthError(`smoke run of graph ${graph} failed: ${error.error ?? "Error"}: ${error.message ?? ""}`);
    opts.log.line(`smoke run of graph ${graph} succeeded in ${Math.round(performance.now() - started)} ms`);
  }
}

async function call(
  proc: AgentProcess,
  path: string,
  json: unknown,
  headers: Record<string, string>,
  opts: ReadinessOptions,
  what: string,
) {
  try {
    return await fetchUpstream(proc.url, path, {
      method: "POST",
      headers,
      json,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  } catch (err) {
    opts.signal.throwIfAborted();
    throw new HealthError(`${what} got no answer: ${(err as Error).message}`, { cause: err });
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
