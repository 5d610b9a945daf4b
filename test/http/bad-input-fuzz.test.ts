import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { BAD_PATH_VALUES, badBodies } from "../support/bad-inputs.ts";
import { startTestPlatform } from "../support/platform.ts";

const BODIES_PER_ENDPOINT = 300;

async function pooled<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

describe("bad input never gets a 5xx", () => {
  test("every documented control-plane endpoint, hundreds of bad bodies and path values", async (t) => {
    const p = (await startTestPlatform(t, { logLevel: "warn" }))!;
    const doc = await (await fetch(p.url + "/openapi.json")).json();
    const failures: string[] = [];
    let sent = 0;
    for (const [path, ops] of Object.entries<
      Record<string, { requestBody?: { content: Record<string, { schema: object }> } }>
    >(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
        const concrete = (v: string) => path.replace(/\{\w+\}/g, v);
        const requests: Array<{ url: string; body?: string }> = [];
        for (const v of BAD_PATH_VALUES) if (params.length) requests.push({ url: concrete(v) });
        const schema = op.requestBody?.content["application/json"]?.schema;
        if (schema)
          for (const body of badBodies(schema, BODIES_PER_ENDPOINT))
            requests.push({ url: concrete(params.length ? "00000000-0000-7000-8000-000000000000" : ""), body });
        await pooled(requests, 8, async (r) => {
          sent++;
          const res = await p.api(r.url, {
            method: method.toUpperCase(),
            body: r.body,
            headers: { "content-type": "application/json" },
          });
          const text = await res.text();
          if (res.status >= 500)
            failures.push(
              `${method.toUpperCase()} ${r.url.slice(0, 80)} body=${(r.body ?? "").slice(0, 80)} -> ${res.status} ${text.slice(0, 200)}`,
            );
          else if (res.status >= 400) {
            let detail: unknown;
            try {
              detail = JSON.parse(text).detail;
            } catch {
              /* not JSON */
            }
            if (detail === undefined)
              failures.push(
                `${method.toUpperCase()} ${r.url.slice(0, 80)} -> ${res.status} without a JSON detail: ${text.slice(0, 120)}`,
              );
          }
        });
      }
    }
    assert.ok(sent > 1000, `only ${sent} requests generated`);
    assert.deepEqual(failures.slice(0, 20), []);
  });
});
