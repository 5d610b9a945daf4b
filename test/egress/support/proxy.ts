import { execFile } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import type { TestContext } from "node:test";
import { MemoryAudit } from "../../../src/egress/audit/audit-log.ts";
import { createCa, LeafMinter } from "../../../src/egress/proxy/certificates.ts";
import { EgressProxy, type RequestAuthorizer } from "../../../src/egress/proxy/egress-proxy.ts";
import { loadEgressSettings } from "../../../src/egress/egress-settings.ts";
import { SandboxPolicy } from "../../../src/egress/policy/policy.ts";
import { proxyConfigSchema, toStoredConfig } from "../../../src/egress/config/proxy-config.ts";
import { hostsSetting, type Upstreams } from "./upstreams.ts";

/**
 * Compiles an API-shaped proxy_config into a live policy without a database: opaque values are
 * "sealed" into a map, `{KEY}` references resolve from `secrets`.
 */
export async function policyFrom(config: unknown, secrets: Record<string, string> = {}): Promise<SandboxPolicy> {
  const parsed = proxyConfigSchema.parse(config);
  const sealed = new Map<string, string>();
  const stored = await toStoredConfig(parsed, async (v) => {
    const id = `v${sealed.size}`;
    sealed.set(id, v);
    return id;
  });
  return new SandboxPolicy(stored, { secrets: new Map(Object.entries(secrets)), sealed });
}

export interface TestProxy {
  proxy: EgressProxy;
  audit: MemoryAudit;
  /** Explicit proxy URL (http://127.0.0.1:port) for sandbox "sb1". */
  proxyUrl: string;
  caFile: string;
  /** CA bundle = the sandbox's CA only (clients in these tests trust nothing else). */
  sandboxCaPem: string;
  setConfig(config: unknown, secrets?: Record<string, string>): Promise<void>;
  /** A transparent listener standing for a captured connection to `host:port`. */
  transparent(host: string, port: number): Promise<number>;
}

export async function startProxy(
  t: TestContext,
  up: Upstreams,
  config: unknown,
  opts: { secrets?: Record<string, string>; env?: Record<string, string>; authorizers?: RequestAuthorizer[] } = {},
): Promise<TestProxy> {
  const settings = loadEgressSettings({
    WHARF_EGRESS_HOSTS: hostsSetting(up),
    WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`,
    WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
    ...opts.env,
  });
  const audit = new MemoryAudit();
  const proxy = new EgressProxy({ settings, audit });
  const ca = await createCa("Wharf test sandbox CA");
  const caFile = path.join(up.dir, `sandbox-ca-${Math.random().toString(36).slice(2)}.pem`);
  fs.writeFileSync(caFile, ca.certPem);
  proxy.addSandbox({
    id: "sb1",
    workspaceId: "ws1",
    policy: await policyFrom(config, opts.secrets),
    minter: new LeafMinter(ca),
    authorizers: opts.authorizers,
  });
  const explicit = await proxy.listenExplicit("sb1");
  t.after(() => proxy.close());
  return {
    proxy,
    audit,
    proxyUrl: `http://127.0.0.1:${(explicit.address() as net.AddressInfo).port}`,
    caFile,
    sandboxCaPem: ca.certPem,
    setConfig: async (config, secrets) => proxy.setPolicy("sb1", await policyFrom(config, secrets ?? opts.secrets)),
    transparent: async (host, port) =>
      ((await proxy.listenTransparent("sb1", { host, port })).address() as net.AddressInfo).port,
  };
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export function run(cmd: string, args: string[], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", ...env },
        timeout: timeoutMs,
        maxBuffer: 8 << 20,
      },
      (err, stdout, stderr) => {
        resolve({
          code: err ? (((err as NodeJS.ErrnoException & { code?: number }).code as unknown as number) ?? 1) : 0,
          stdout,
          stderr,
        });
      },
    );
  });
}

/** curl through the explicit proxy, trusting only the sandbox CA; prints status then body. */
export function curl(p: TestProxy, url: string, extra: string[] = []): Promise<Run> {
  return run(
    "curl",
    ["-sS", "--max-time", "15", "-x", p.proxyUrl, "--cacert", p.caFile, "-w", "\n%{http_code}", ...extra, url],
    { NO_PROXY: "" },
  );
}

export function parseCurl(r: Run): { status: number; body: string; json: any } {
  const i = r.stdout.lastIndexOf("\n");
  const body = r.stdout.slice(0, i);
  let json: any = null;
  try {
    json = JSON.parse(body);
  } catch {}
  return { status: Number(r.stdout.slice(i + 1)), body, json };
}
