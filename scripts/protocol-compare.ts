/**
 * Compares the event-based protocol's event sequence of Wharf with the reference LangGraph JS
 * server's on the same graph (test/agent-server/fixtures/protocol, graph `agent`: a tool call, a
 * subgraph, an interrupt, then a resume read with `since`).
 *
 *   langgraphjs dev --port 2099 --no-browser   # in a folder whose langgraph.json serves that graph as "agent"
 *   node --import tsx scripts/protocol-compare.ts http://127.0.0.1:2099
 *
 * Prints both sequences side by side (method@namespace:event(node)); exits 1 when they differ
 * other than in where the terminal root lifecycle lands (the reference sends it later).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startAgentServer } from "../src/agent-server/index.ts";
import { createLogger } from "../src/log/logger.ts";

interface Ev {
  seq: number;
  method: string;
  params: { namespace: string[]; node?: string; data: { event?: string; interrupt_id?: string } };
}
const CHANNELS = ["lifecycle", "values", "updates", "messages", "tools", "input", "custom", "checkpoints", "tasks"];
const isEnd = (e: Ev) =>
  e.method === "lifecycle" &&
  e.params.namespace.length === 0 &&
  ["completed", "interrupted", "failed"].includes(e.params.data.event ?? "");

async function events(url: string, threadId: string, body: unknown): Promise<Ev[]> {
  const ac = new AbortController();
  const res = await fetch(`${url}/threads/${threadId}/stream/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: ac.signal,
  });
  const reader = res.body!.getReader();
  const out: Ev[] = [];
  let buf = "";
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline && !out.some(isEnd)) {
    const { value, done } = await Promise.race([
      reader.read(),
      new Promise<{ value: undefined; done: false }>((r) =>
        setTimeout(() => r({ value: undefined, done: false }), 300),
      ),
    ]);
    if (done) break;
    if (value) buf += new TextDecoder().decode(value);
    const frames = buf.split("\n\n");
    buf = frames.pop()!;
    for (const f of frames) {
      const data = f
        .split("\n")
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n");
      if (data) out.push(JSON.parse(data) as Ev);
    }
  }
  ac.abort();
  return out;
}

const command = async (url: string, threadId: string, c: unknown) =>
  (
    await fetch(`${url}/threads/${threadId}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(c),
    })
  ).json() as Promise<{ type: string }>;
const label = (e: Ev) =>
  `${e.method}${e.params.namespace.length ? "@" + e.params.namespace.map((s) => s.split(":")[0]).join("/") : ""}${e.params.data?.event ? ":" + e.params.data.event : ""}${e.params.node ? "(" + e.params.node + ")" : ""}`;

async function scenario(url: string): Promise<string[]> {
  const threadId = crypto.randomUUID();
  await command(url, threadId, {
    id: 1,
    method: "run.start",
    params: { assistant_id: "agent", input: { messages: [{ role: "human", content: "ask me" }] } },
  });
  const first = await events(url, threadId, { channels: CHANNELS });
  const asked = first.find((e) => e.method === "input.requested");
  await command(url, threadId, {
    id: 2,
    method: "input.respond",
    params: { interrupt_id: asked?.params.data.interrupt_id, response: "yes" },
  });
  const second = await events(url, threadId, { channels: CHANNELS, since: first.at(-1)!.seq });
  return [...first, ...second].map(label);
}

const referenceUrl = process.argv[2];
if (!referenceUrl) {
  console.error("usage: node --import tsx scripts/protocol-compare.ts <reference server URL>");
  process.exit(2);
}
const fixture = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "../test/agent-server/fixtures/protocol/src/graphs.ts",
);
const project = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-protocol-compare-"));
fs.writeFileSync(
  path.join(project, "langgraph.json"),
  JSON.stringify({ graphs: { agent: `${path.relative(project, fixture)}:agent` } }),
);
const wharf = await startAgentServer({
  projectDir: project,
  host: "127.0.0.1",
  port: 0,
  databaseUrl: null,
  home: path.join(project, "home"),
  open: true,
  log: createLogger({ level: "warn" }),
});
const ours = await scenario(wharf.url);
await wharf.stop();
const theirs = await scenario(referenceUrl);
const strip = (l: string[]) => l.filter((x) => !/^lifecycle:(completed|interrupted|failed)$/.test(x));
let differ = 0;
for (let i = 0; i < Math.max(ours.length, theirs.length); i++) {
  if (ours[i] !== theirs[i]) differ++;
  console.log(`${ours[i] === theirs[i] ? " " : "!"} ${String(ours[i] ?? "").padEnd(50)} ${theirs[i] ?? ""}`);
}
const same = JSON.stringify(strip(ours)) === JSON.stringify(strip(theirs));
console.log(
  `wharf ${ours.length} events, reference ${theirs.length}; ${differ} positions differ; ${same ? "the same sequence" : "DIFFERENT sequences"} apart from where the terminal root lifecycle lands`,
);
process.exit(same ? 0 : 1);
