import type { AgentProcess } from "./agent-process.ts";
import type { RevisionLog } from "./revision-logs.ts";

export class HealthError extends Error {}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `GET /ok` until 200, failing at once if the process exits or the phase is aborted. */
export async function waitUntilUp(proc: AgentProcess, signal: AbortSignal, log: RevisionLog): Promise<void> {
  const started = performance.now();
  for (let attempt = 0; ; attempt++) {
    signal.throwIfAborted();
    if (!proc.running) throw new HealthError(`the agent server exited (code ${await proc.exited}) before answering GET /ok`);
    try {
      const res = await fetch(`${proc.url}/ok`, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) {
        log.line(`GET /ok answered 200 after ${Math.round(performance.now() - started)} ms`);
        return;
      }
    } catch {
      /* not listening yet */
    }
    await sleep(Math.min(25 * 2 ** Math.min(attempt, 3), 200));
  }
}

/**
 * A real stateless run of every graph (`POST /runs/wait`), as a client would make it. A graph that
 * cannot answer "health" fails the deploy. A project with custom auth may refuse the platform's
 * key: that is its right, and then `/ok` plus the build's load check are the evidence.
 */
export async function healthRuns(
  proc: AgentProcess,
  graphs: string[],
  opts: { apiKey: string; hasCustomAuth: boolean; signal: AbortSignal; log: RevisionLog; timeoutMs: number },
): Promise<void> {
  for (const graph of graphs) {
    opts.signal.throwIfAborted();
    const started = performance.now();
    let res: Response;
    try {
      res = await fetch(`${proc.url}/runs/wait`, {
        method: "POST",
        // `x-auth-scheme: langsmith` + a platform key is the Studio (developer) access the agent
        // server grants past a project's custom auth, unless the project disables it.
        headers: { "content-type": "application/json", "x-api-key": opts.apiKey, "x-auth-scheme": "langsmith" },
        body: JSON.stringify({ assistant_id: graph, input: { messages: [{ role: "human", content: "health" }] } }),
        signal: AbortSignal.any([opts.signal, AbortSignal.timeout(opts.timeoutMs)]),
      });
    } catch (err) {
      opts.signal.throwIfAborted();
      throw new HealthError(`health run of graph ${graph} got no answer: ${(err as Error).message}`);
    }
    const text = await res.text();
    if ((res.status === 401 || res.status === 403) && opts.hasCustomAuth) {
      opts.log.line(`health run of graph ${graph}: the project's custom auth answered ${res.status} to the platform's key; relying on /ok and the build's load check`, "warning");
      continue;
    }
    if (res.status !== 200) throw new HealthError(`health run of graph ${graph} answered ${res.status}: ${text.slice(0, 500)}`);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new HealthError(`health run of graph ${graph} answered 200 with a body that is not JSON: ${text.slice(0, 200)}`);
    }
    const error = (body as { __error__?: { error?: string; message?: string } } | null)?.__error__;
    if (error) throw new HealthError(`health run of graph ${graph} failed: ${error.error ?? "Error"}: ${error.message ?? ""}`);
    opts.log.line(`health run of graph ${graph} succeeded in ${Math.round(performance.now() - started)} ms`);
  }
}
