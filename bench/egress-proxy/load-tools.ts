/**
 * Load generators that are not the bottleneck: `wrk` (HTTP/1.1, Debian package `wrk`) and `h2load`
 * (HTTP/2, Debian package `nghttp2-client`), both C and event-driven; a Node client spends more CPU
 * per request than the proxy it measures. Both connect where we say (`wrk.resolve` overridden,
 * `h2load --connect-to`) while SNI and Host/:authority name the destination, as a sandbox's client
 * does when its connection is captured.
 */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

export interface Row {
  name: string;
  rps: number;
  /** Milliseconds: wrk's p50, h2load's mean (it reports no percentiles). */
  latency: number;
  errors: number;
  requests: number;
}

export const hasTool = (cmd: string, arg = "--version"): boolean =>
  spawnSync(cmd, [arg], { stdio: "ignore" }).error === undefined;

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.once("error", reject);
    child.once("exit", () => resolve(out));
  });
}

export interface WrkTarget {
  scheme: "http" | "https";
  /** Where wrk connects (the proxy's listener or the upstream). */
  connect: { host: string; port: number };
  /** Host header and, for https, SNI. */
  host: string;
  /** The request target: origin-form, or absolute-form for an explicit proxy. */
  target: string;
  /** One request per connection (`Connection: close`): a new TLS handshake per request. */
  close?: boolean;
}

/** One wrk run; `dir` holds its Lua script (wrk takes the address to dial only from a script). */
export async function wrk(dir: string, name: string, t: WrkTarget, connections: number, seconds: number): Promise<Row> {
  const script = path.join(dir, `wrk-${name.replace(/\W+/g, "-")}.lua`);
  fs.writeFileSync(
    script,
    [
      `wrk.resolve = function(host, service) wrk.addrs = wrk.lookup("${t.connect.host}", "${t.connect.port}") end`,
      `wrk.path = "${t.target}"`,
      `wrk.headers["Host"] = "${t.host}"`,
      `wrk.headers["User-Agent"] = "bench"`,
      t.close ? `wrk.headers["Connection"] = "close"` : "",
      `done = function(s, latency)`,
      `  local e = s.errors`,
      `  io.write(string.format("WRKJSON {\\"requests\\":%d,\\"duration\\":%d,\\"errors\\":%d,\\"p50\\":%d}\\n", s.requests, s.duration, e.connect + e.read + e.write + e.timeout + e.status, latency:percentile(50)))`,
      `end`,
    ].join("\n"),
  );
  const out = await run("wrk", ["-t1", `-c${connections}`, `-d${seconds}s`, "-s", script, `${t.scheme}://${t.host}/`]);
  const m = /WRKJSON (\{.*\})/.exec(out);
  if (!m) throw new Error(`wrk failed: ${out.slice(0, 500)}`);
  const r = JSON.parse(m[1]);
  return { name, rps: r.requests / (r.duration / 1e6), latency: r.p50 / 1000, errors: r.errors, requests: r.requests };
}

export interface H2Target {
  connect: { host: string; port: number };
  /** :authority and SNI. */
  host: string;
  target: string;
}

/** One h2load run: `connections` clients with up to `streams` concurrent streams each. */
export async function h2load(
  name: string,
  t: H2Target,
  connections: number,
  streams: number,
  seconds: number,
): Promise<Row> {
  const out = await run("h2load", [
    "-t1",
    `-c${connections}`,
    `-m${streams}`,
    `-D`,
    String(seconds),
    "--warm-up-time=1",
    `--connect-to=${t.connect.host}:${t.connect.port}`,
    "-H",
    "user-agent: bench",
    `https://${t.host}${t.target}`,
  ]);
  const rps = /finished in [\d.]+\w+, ([\d.]+) req\/s/.exec(out);
  const req = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out);
  const lat = /time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)/.exec(out);
  if (!rps || !req) throw new Error(`h2load failed: ${out.slice(0, 500)}`);
  const unit = lat?.[2] === "us" ? 1e-3 : lat?.[2] === "s" ? 1e3 : 1;
  return {
    name,
    rps: Number(rps[1]),
    latency: lat ? Number(lat[1]) * unit : NaN,
    errors: Number(req[4]) + Number(req[5]),
    requests: Number(req[3]),
  };
}
