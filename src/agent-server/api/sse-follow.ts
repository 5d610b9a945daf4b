import { guardController } from "../../http/web-stream.ts";
import { CORS_HEADERS } from "../wire.ts";

const encoder = new TextEncoder();
/** A comment line without the blank line that would end an event: clients, proxies and the SDK's idle watchdog see traffic, parsers see nothing. */
export const HEARTBEAT = encoder.encode(":\n");
export const HEARTBEAT_MS = 15_000;

/**
 * An open-ended SSE response following `open(signal)`'s events until the client leaves or
 * `serverStop` aborts. Pull-driven: a client that stops reading stops the follow, so what it follows
 * stays bounded; a heartbeat every 15 s keeps proxies from cutting a quiet stream. `frame` gives an
 * event's SSE text, or null to leave it out.
 */
export function followSse<T>(
  req: Request,
  serverStop: AbortSignal,
  open: (signal: AbortSignal) => AsyncGenerator<T>,
  frame: (event: T) => string | null,
): Response {
  const stop = new AbortController();
  const onGone = () => stop.abort();
  req.signal.addEventListener("abort", onGone, { once: true });
  serverStop.addEventListener("abort", onGone, { once: true });
  if (serverStop.aborted) stop.abort();
  const events = open(stop.signal);
  let heartbeat: NodeJS.Timeout | null = null;
  const end = () => {
    if (heartbeat) clearInterval(heartbeat);
    req.signal.removeEventListener("abort", onGone);
    serverStop.removeEventListener("abort", onGone);
    stop.abort();
  };
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      // A timer, outside the stream's machinery: a write after the end must not throw.
      const g = guardController(controller);
      heartbeat = setInterval(() => g.enqueue(HEARTBEAT), HEARTBEAT_MS);
      heartbeat.unref();
    },
    async pull(controller) {
      for (;;) {
        const { value, done } = await events.next();
        if (done) {
          end();
          controller.close();
          return;
        }
        const text = frame(value);
        if (text !== null) return controller.enqueue(encoder.encode(text));
      }
    },
    cancel() {
      end();
      void events.return(undefined);
    },
  });
  return new Response(stream, {
    status: 200,
    headers: {
      ...CORS_HEADERS,
      "cache-control": "no-cache",
      connection: "keep-alive",
      "content-type": "text/event-stream",
    },
  });
}
