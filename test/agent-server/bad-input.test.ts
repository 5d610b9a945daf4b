import assert from "node:assert/strict";
import { test } from "node:test";
import { startTestAgentServer } from "./support.ts";

// Every agent-server route answers malformed bodies, wrong types and unknown or malformed ids with
// a 4xx and a reason, never a 5xx.
const U = "6f1c2a64-0000-4000-8000-000000000000";
const ROUTES: Array<[string, string]> = [
  ["POST", "/assistants"],
  ["POST", "/assistants/search"],
  ["POST", "/assistants/count"],
  ["GET", `/assistants/${U}`],
  ["PATCH", `/assistants/${U}`],
  ["DELETE", `/assistants/${U}`],
  ["GET", `/assistants/${U}/graph`],
  ["GET", `/assistants/${U}/schemas`],
  ["POST", `/assistants/${U}/versions`],
  ["POST", `/assistants/${U}/latest`],
  ["POST", "/threads"],
  ["POST", "/threads/search"],
  ["POST", "/threads/count"],
  ["GET", `/threads/${U}`],
  ["PATCH", `/threads/${U}`],
  ["DELETE", `/threads/${U}`],
  ["GET", `/threads/${U}/state`],
  ["POST", `/threads/${U}/state`],
  ["PATCH", `/threads/${U}/state`],
  ["POST", `/threads/${U}/state/checkpoint`],
  ["GET", `/threads/${U}/state/nope`],
  ["POST", `/threads/${U}/history`],
  ["GET", `/threads/${U}/history?limit=abc`],
  ["POST", `/threads/${U}/copy`],
  ["GET", `/threads/${U}/stream`],
  ["POST", "/runs/stream"],
  ["POST", "/runs/wait"],
  ["POST", "/runs"],
  ["POST", "/runs/batch"],
  ["GET", `/runs/${U}/stream`],
  ["POST", `/threads/${U}/runs`],
  ["POST", `/threads/${U}/runs/stream`],
  ["POST", `/threads/${U}/runs/wait`],
  ["GET", `/threads/${U}/runs`],
  ["GET", `/threads/${U}/runs/${U}`],
  ["DELETE", `/threads/${U}/runs/${U}`],
  ["GET", `/threads/${U}/runs/${U}/join`],
  ["GET", `/threads/${U}/runs/${U}/stream`],
  ["POST", `/threads/${U}/runs/${U}/cancel`],
  ["POST", "/runs/crons"],
  ["POST", `/threads/${U}/runs/crons`],
  ["POST", "/runs/crons/search"],
  ["POST", "/runs/crons/count"],
  ["PATCH", `/runs/crons/${U}`],
  ["DELETE", `/runs/crons/${U}`],
  ["PUT", "/store/items"],
  ["GET", "/store/items"],
  ["DELETE", "/store/items"],
  ["POST", "/store/items/search"],
  ["POST", "/store/namespaces"],
];
const BODIES = [
  "{",
  "[]",
  "null",
  '"x"',
  "42",
  '{"assistant_id": 5, "thread_id": [], "metadata": "m", "limit": -1, "namespace": "a", "key": 3, "values": 1, "input": 1, "config": 7, "schedule": 9, "checkpoint": "c"}',
  '{"assistant_id":"' + U + '","input":{}}',
];

test("bad input on every route is a 4xx with a reason, never a 5xx", async (t) => {
  const server = await startTestAgentServer(t, { open: true });
  if (!server) return;
  const problems: string[] = [];
  for (const [method, path] of ROUTES) {
    const variants = method === "GET" || method === "DELETE" ? [undefined, ...BODIES.slice(0, 2)] : BODIES;
    for (const body of variants) {
      for (const p of [path, path.replace(U, "not-a-uuid")]) {
        const res = await fetch(`${server.url}${p}`, {
          method,
          headers: { "content-type": "application/json" },
          body: method === "GET" ? undefined : body,
        });
        const text = await res.text();
        if (res.status >= 500 || (res.status >= 400 && !text.trim()))
          problems.push(`${method} ${p} ${body ?? ""} → ${res.status} ${text.slice(0, 120)}`);
      }
    }
  }
  assert.deepEqual(problems, []);
});
