import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { REFUSAL_HINT, type OutboundPolicy } from "./outbound-policy.ts";
import { startOutboundProxy } from "./outbound-proxy.ts";

const execFileP = promisify(execFile);
const FORWARDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "netns-forwarder.ts");
const TSX = import.meta.resolve("tsx");

/** A destination the command asked for was refused by the egress address policy. */
export class OutboundRefused extends Error {}

/** The command's download passed its bound (`maxBytes`) and was cut. */
export class OutboundTooLarge extends Error {}

export interface PolicyRun {
  policy: OutboundPolicy;
  command: string;
  args: string[];
  /** The command's whole environment (proxy variables are added). */
  env: Record<string, string>;
  /** `host:port` destinations the command dials directly even with a proxy set (loopback, for Go). */
  direct: string[];
  timeoutMs: number;
  /** Bytes the command may receive in all (every connection is cut past it); unbounded when absent. */
  maxBytes?: number;
}

/**
 * Runs a fetching command (an image pull) in its own network namespace whose only way out is the
 * outbound policy proxy: whatever it dials, named in a reference, a redirect or a token realm, is
 * checked against the egress address policy. Needs root (a network namespace). Throws
 * `OutboundRefused` with the policy's reason when a destination was refused, so the error reads
 * the same whether or not anything listens there.
 */
export async function runWithOutboundPolicy(run: PolicyRun): Promise<{ stdout: string; stderr: string }> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), "wharf-out-"));
  const socket = path.join(dir, "proxy.sock");
  const proxy = await startOutboundProxy(run.policy, { listen: { path: socket }, maxBytes: run.maxBytes });
  const tooLarge = () => new OutboundTooLarge(`its download passed ${run.maxBytes} bytes and was cut`);
  const used = new Set(run.direct.map((d) => Number(d.slice(d.lastIndexOf(":") + 1))));
  let port = 3128;
  while (used.has(port)) port++;
  const url = `http://127.0.0.1:${port}`;
  const env = { ...run.env, HTTPS_PROXY: url, HTTP_PROXY: url, https_proxy: url, http_proxy: url };
  const forwarder = [
    process.execPath,
    "--import",
    TSX,
    FORWARDER,
    socket,
    String(port),
    ...run.direct.flatMap((d) => ["--direct", d]),
    "--",
    run.command,
    ...run.args,
  ];
  try {
    const out = await execFileP("unshare", ["--net", "--", ...forwarder], {
      env,
      timeout: run.timeoutMs,
      maxBuffer: 4 << 20,
    });
    if (proxy.overLimit) throw tooLarge();
    return out;
  } catch (err) {
    if (err instanceof OutboundTooLarge) throw err;
    if (proxy.overLimit) throw Object.assign(tooLarge(), { cause: err });
    if (proxy.refusals.length)
      throw new OutboundRefused(`refused by the platform's egress policy: ${proxy.refusals[0]} (${REFUSAL_HINT})`, {
        cause: err,
      });
    throw err;
  } finally {
    await proxy.close();
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}
