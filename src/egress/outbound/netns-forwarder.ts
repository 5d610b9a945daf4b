import { spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { splice } from "./splice.ts";

/**
 * Runs inside a fresh network namespace (started by `unshare --net`), where nothing but this
 * program listens: it brings loopback up, forwards 127.0.0.1:<port> to the outbound policy proxy's
 * Unix socket (outside the namespace), then runs the command with that as its proxy. A command
 * that ignores the proxy for loopback (Go's HTTP client does) finds no one there, except on the
 * `--direct host:port` listeners, whose connections are tunnelled to that same destination
 * through the proxy (so the policy decides them too).
 *
 *   netns-forwarder.ts <socket> <port> [--direct host:port]... -- command args...
 */
const argv = process.argv.slice(2);
const sep = argv.indexOf("--");
const [socketPath, portText, ...opts] = argv.slice(0, sep);
const command = argv.slice(sep + 1);
const directs: string[] = [];
for (let i = 0; i < opts.length; i += 2) if (opts[i] === "--direct") directs.push(opts[i + 1]);

function fail(message: string): never {
  process.stderr.write(`netns-forwarder: ${message}\n`);
  process.exit(125);
}

function pipeTo(client: net.Socket, preface: string | null): void {
  const upstream = net.connect(socketPath);
  if (preface === null) return splice(client, upstream);
  client.pause();
  client.on("error", () => upstream.destroy());
  upstream.on("error", () => client.destroy());
  upstream.write(preface);
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) return void (head.length > 8192 && upstream.destroy());
    upstream.off("data", onData);
    if (!/^HTTP\/1\.[01] 200 /.test(head.toString("latin1"))) {
      upstream.destroy();
      return void client.destroy();
    }
    if (head.length > end + 4) client.write(head.subarray(end + 4));
    splice(client, upstream);
    client.resume();
  };
  upstream.on("data", onData);
}

function listen(host: string, port: number, preface: string | null): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((c) => pipeTo(c, preface));
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
}

async function main(): Promise<void> {
  if (!socketPath || sep < 0 || command.length === 0)
    fail("usage: <socket> <port> [--direct host:port]... -- command args...");
  const up = spawnSync("ip", ["link", "set", "lo", "up"], { stdio: ["ignore", "ignore", "pipe"] });
  if (up.status !== 0) fail(`cannot bring loopback up: ${up.stderr?.toString().trim()}`);
  await listen("127.0.0.1", Number(portText), null);
  for (const d of directs) {
    const i = d.lastIndexOf(":");
    const host = d.slice(0, i).replace(/^\[|\]$/g, "");
    const port = Number(d.slice(i + 1));
    const preface = `CONNECT ${d} HTTP/1.1\r\nHost: ${d}\r\n\r\n`;
    // A name (localhost) may resolve to either loopback address: both lead to the proxy.
    const binds = net.isIP(host) ? [host] : ["127.0.0.1", "::1"];
    for (const b of binds)
      await listen(b, port, preface).catch((err: Error) =>
        b === "::1" ? undefined : fail(`cannot listen on ${b}:${port}: ${err.message}`),
      );
  }
  const child = spawn(command[0], command.slice(1), { stdio: "inherit" });
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => child.kill("SIGKILL"));
  child.on("error", (err) => fail(`${command[0]}: ${err.message}`));
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
}

main().catch((err: Error) => fail(err.message));
