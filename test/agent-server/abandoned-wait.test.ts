import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import { startTestAgentServer } from "./support.ts";

/** POSTs `body` to `url` over a raw socket, hangs up once the first bytes of the answer arrive. */
function postThenHangUp(url: string, body: unknown): Promise<string> {
  const u = new URL(url);
  const json = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () =>
      socket.write(
        `POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
      ),
    );
    socket.once("data", (d: Buffer) => {
      socket.destroy();
      resolve(d.toString());
    });
    socket.on("error", reject);
  });
}

describe("abandoned waits", () => {
  for (const onDisconnect of ["continue", "cancel"]) {
    test(`a /runs/wait client that hangs up while the run goes on (on_disconnect=${onDisconnect}): the run's end writes to no closed stream`, async (t) => {
      const server = await startTestAgentServer(t, { open: true });
      if (!server) return;
      const faults: unknown[] = [];
      const record = (err: unknown) => faults.push(err);
      process.on("uncaughtException", record);
      process.on("unhandledRejection", record);
      t.after(() => {
        process.off("uncaughtException", record);
        process.off("unhandledRejection", record);
      });
      // Slower than a second: the answer starts with keep-alive newlines, then the client leaves.
      const first = await postThenHangUp(`${server.url}/runs/wait`, {
        assistant_id: "slow",
        input: { messages: [{ role: "human", content: "sleep 1800" }] },
        on_disconnect: onDisconnect,
      });
      assert.match(first, /^HTTP\/1.1 200/);
      await new Promise((r) => setTimeout(r, 2500));
      assert.deepEqual(faults.map(String), []);
      const res = await fetch(`${server.url}/ok`);
      assert.equal(res.status, 200);
    });
  }
});
