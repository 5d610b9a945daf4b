// Shared helpers for tests of the event-based streaming protocol (POST /threads/{id}/commands and
// /threads/{id}/stream/events), whatever language the graph is in.
import assert from "node:assert/strict";

/**
 * The events of an SSE protocol stream until `until` says stop (or `timeoutMs` pass). Each frame's
 * `id:` must be the event's `seq`: a reconnecting client resumes from it.
 */
export async function protocolSseEvents(
  url: string,
  headers: Record<string, string>,
  threadId: string,
  filter: Record<string, unknown>,
  until: (events: any[]) => boolean,
  timeoutMs = 10_000,
): Promise<any[]> {
  const ac = new AbortController();
  const res = await fetch(`${url}/threads/${threadId}/stream/events`, {
    method: "POST",
    headers,
    body: JSON.stringify(filter),
    signal: ac.signal,
  });
  if (res.status !== 200) assert.fail(`${res.status} ${await res.text()}`);
  assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: any[] = [];
  let buf = "";
  const deadline = Date.now() + timeoutMs;
  try {
    while (!until(events)) {
      assert.ok(Date.now() < deadline, `timed out; got ${events.map((e) => e.method).join(",")}`);
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = frame
          .split("\n")
          .filter((l) => l.startsWith("data: "))
          .map((l) => l.slice(6))
          .join("\n");
        if (!data) continue;
        const ev = JSON.parse(data);
        assert.equal(
          frame.split("\n").find((l) => l.startsWith("id: ")),
          `id: ${ev.seq}`,
        );
        events.push(ev);
      }
    }
  } finally {
    ac.abort();
  }
  return events;
}

/** Whether the root run's lifecycle has ended (completed, failed or interrupted). */
export const rootEnded = (events: any[]) =>
  events.some(
    (e) =>
      e.method === "lifecycle" &&
      e.params.namespace.length === 0 &&
      ["completed", "failed", "interrupted"].includes(e.params.data.event),
  );
