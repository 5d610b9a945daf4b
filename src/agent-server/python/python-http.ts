import { randomUUID } from "node:crypto";
import type { PythonWorkers } from "./worker-pool.ts";

/** Statuses whose responses have no body (the Fetch `Response` refuses one). */
const NO_BODY = new Set([101, 204, 205, 304]);

/**
 * `http.app` as a Python ASGI app (FastAPI, Starlette), called in the worker: whether a method and
 * path are the app's is asked once and remembered (at most `maxRemembered`); matching requests are
 * forwarded whole, and the answer streams back as the app writes it (a `StreamingResponse` or SSE
 * reaches the client chunk by chunk; a client that goes away cancels the app's request). Others
 * fall through to the API.
 */
export class PythonHttpApp {
  private readonly matches = new Map<string, boolean>();

  constructor(
    private readonly workers: PythonWorkers,
    private readonly maxRemembered = 1000,
  ) {}

  private async isAppRoute(method: string, path: string): Promise<boolean> {
    const key = `${method} ${path}`;
    const known = this.matches.get(key);
    if (known !== undefined) return known;
    const { match } = await this.workers.call<{ match: boolean }>("http.match", { method, path });
    if (this.matches.size >= this.maxRemembered) this.matches.delete(this.matches.keys().next().value!);
    this.matches.set(key, match);
    return match;
  }

  /** The app's response, or null when no route of the app matches. */
  async handle(request: Request): Promise<Response | null> {
    const url = new URL(request.url);
    if (!(await this.isAppRoute(request.method, url.pathname))) return null;
    const body = request.body ? Buffer.from(await request.arrayBuffer()) : null;
    // The id the request is cancelled by (the workers route it like a run's).
    const id = randomUUID();
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    let finished = false;
    const stream = new ReadableStream<Uint8Array>({
      start: (c) => void (controller = c),
      cancel: () => {
        if (!finished) void this.workers.request("run.cancel", { run_id: id }).catch(() => undefined); // a worker that is gone has no request left to cancel
      },
    });
    return new Promise<Response>((resolve, reject) => {
      let started = false;
      const onEvent = (event: string, chunk: Buffer) => {
        if (event === "start") {
          started = true;
          const h = JSON.parse(chunk.toString("utf8")) as { status: number; headers: Array<[string, string]> };
          resolve(new Response(NO_BODY.has(h.status) ? null : stream, { status: h.status, headers: new Headers(h.headers) }));
        } else if (event === "body") {
          try {
            controller.enqueue(new Uint8Array(chunk));
          } catch {
            // The client went away: its cancel stops the app's request.
          }
        }
      };
      const sent = this.workers.request("http.request", {
        run_id: id,
        method: request.method,
        path: url.pathname,
        query: url.search.replace(/^\?/, ""),
        headers: [...request.headers.entries()],
        body: body?.length ? body.toString("base64") : null,
      }, onEvent);
      sent.then(
        () => {
          finished = true;
          try {
            controller.close();
          } catch {
            // Already cancelled by the client.
          }
        },
        (err: unknown) => {
          finished = true;
          if (!started) return reject(err as Error);
          try {
            controller.error(err);
          } catch {
            // Already cancelled by the client.
          }
        },
      );
    });
  }
}
