import fs from "node:fs";
import type net from "node:net";
import tls from "node:tls";
import crypto from "node:crypto";
import { secretKeysOf, type EgressRuntime, type SecretDependent } from "../egress-runtime.ts";
import { policyOf, type SandboxSpec } from "../supervisor/data-plane.ts";
import { FakeDns } from "./fake-dns.ts";
import { openNamespaceListeners, routeAllToLoopback, type NamespaceListeners } from "./netns-capture.ts";
import type { SandboxPolicy } from "../policy/policy.ts";
import { deleteValues } from "../credentials/sealed-values.ts";

/** Where the sandbox finds the CA: alone (Node appends it) and inside the system bundle (everyone else). */
export const SANDBOX_CA_FILE = "/usr/local/share/ca-certificates/wharf-egress-ca.crt";
export const SANDBOX_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt";
const HOST_BUNDLES = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"];

let systemBundle: string | null = null;
function systemRoots(): string {
  if (systemBundle === null) {
    systemBundle = "";
    for (const f of HOST_BUNDLES) {
      try {
        systemBundle = fs.readFileSync(f, "utf8");
        break;
      } catch {
        // Not on this host: try the next usual place (Node's own roots are the fallback).
      }
    }
    if (!systemBundle) systemBundle = tls.rootCertificates.join("\n") + "\n";
  }
  return systemBundle;
}

/** `*.example.com` → `.example.com`: the suffix form curl, Python and Go read in NO_PROXY. */
function noProxyEntry(glob: string): string {
  return glob.startsWith("*.") ? glob.slice(1) : glob;
}

export interface AttachTarget {
  sandboxId: string;
  workspaceId: string;
  netnsPid: number;
  proxyConfig: unknown;
}

/**
 * The egress side of one running sandbox: listeners in its namespace (80, 443, the explicit proxy
 * port, raw ports from its allow_list, DNS), the fake-address DNS stub, its live rules in the
 * proxy, and the environment and files that make its clients use and trust the proxy.
 */
export class SandboxEgress implements SecretDependent {
  readonly env: Record<string, string> = {};
  readonly files: Record<string, string> = {};
  private listeners: NamespaceListeners = { tcp: new Map(), udp: [], errors: [] };
  /** Answered here, in the control plane: the names it hands out survive a data-plane restart. */
  private readonly dns = new FakeDns((address, name) =>
    this.rt.plane.addNames(this.target.sandboxId, [[address, name]]),
  );
  private spec: SandboxSpec | null = null;
  /** This attachment's registration (a newer attach of the same sandbox replaces it). */
  private readonly owner = crypto.randomUUID();
  private stored: unknown;
  private closed = false;
  private untrack: (() => void) | null = null;
  private keys: Set<string> | null = null;
  private updating: Promise<void> = Promise.resolve();
  /** Raw ports the prepared rules open (listened on at attach). */
  private rawPorts: number[] = [];
  /** Set at attach: the namespace's process (prepare runs before the namespace exists). */
  private netnsPid: number;
  private attached = false;
  private pending: { stored: unknown } | null = null;

  constructor(
    private readonly rt: EgressRuntime,
    private readonly target: AttachTarget,
  ) {
    this.stored = target.proxyConfig;
    this.netnsPid = target.netnsPid;
  }

  /**
   * Everything that does not need the namespace: the workspace CA, the rules resolved now, the
   * engines, and the environment and files the sandbox's processes start with. Split from
   * `attach` for callers that must know `env`/`files` before the namespace exists (a confined
   * service's environment and mounts are fixed when it is spawned).
   */
  async prepare(): Promise<void> {
    if (this.spec) return;
    const { sandboxId, workspaceId } = this.target;
    const ca = await this.rt.caFor(workspaceId);
    const compiled = await this.rt.resolveConfig(workspaceId, this.stored);
    const policy = policyOf(compiled);
    const engines = this.rt.enginesFor({ id: sandboxId, workspaceId }, policy);
    this.spec = { id: sandboxId, workspaceId, ca, compiled, owner: this.owner };
    this.rawPorts = policy.rawPorts();
    this.files[SANDBOX_CA_FILE] = ca.certPem;
    this.files[SANDBOX_CA_BUNDLE] = systemRoots().trimEnd() + "\n" + ca.certPem;
    this.files["/etc/resolv.conf"] = "nameserver 127.0.0.1\noptions timeout:2 attempts:2\n";
    Object.assign(this.files, engines.files);
    this.setEnv(policy, engines.env);
  }

  /**
   * `prepared`: listeners (and routes) the sandbox driver set up while creating the namespace;
   * only raw ports this sandbox's allow_list opens are added, through the in-namespace helper.
   * Without them, everything is set up here.
   */
  async attach(prepared: NamespaceListeners | null = null, netnsPid = this.target.netnsPid): Promise<void> {
    await this.prepare();
    this.netnsPid = netnsPid;
    this.rt.plane.upsertSandbox(this.spec!);
    try {
      const ports = [...new Set([80, 443, this.rt.settings.proxyPort, ...this.rawPorts])];
      if (prepared) {
        this.listeners = prepared;
        const missing = ports.filter((p) => !prepared.tcp.has(p));
        if (missing.length)
          for (const [port, server] of (await openNamespaceListeners(netnsPid, { tcp: missing, dns: false })).tcp)
            this.listeners.tcp.set(port, server);
      } else {
        await routeAllToLoopback(netnsPid);
        this.listeners = await openNamespaceListeners(netnsPid, { tcp: ports, dns: true });
      }
      if (
        !this.listeners.tcp.has(80) ||
        !this.listeners.tcp.has(443) ||
        !this.listeners.tcp.has(this.rt.settings.proxyPort)
      ) {
        throw new Error(`cannot listen in the sandbox network: ${this.listeners.errors.join("; ")}`);
      }
      for (const [port, server] of this.listeners.tcp) this.serve(port, server);
      for (const u of this.listeners.udp) this.dns.serve(u);
    } catch (err) {
      await this.detach();
      throw err;
    }
    this.attached = true;
    this.untrack = this.rt.track(this);
    if (this.pending) {
      const { stored } = this.pending;
      this.pending = null;
      await this.update(stored);
    }
  }

  get workspaceId(): string {
    return this.target.workspaceId;
  }

  /** The workspace secrets the live rules name. */
  secretKeys(): Set<string> {
    return (this.keys ??= secretKeysOf(this.stored));
  }

  /** Re-resolves the live rules (a workspace secret they name was written or deleted). */
  refresh(): Promise<void> {
    return this.update(this.stored);
  }

  private setEnv(policy: SandboxPolicy, engineEnv: Record<string, string>): void {
    for (const k of Object.keys(this.env)) delete this.env[k];
    const proxyUrl = `http://127.0.0.1:${this.rt.settings.proxyPort}`;
    const noProxy = ["localhost", "127.0.0.1", "::1", ...policy.stored.no_proxy.map(noProxyEntry)].join(",");
    Object.assign(this.env, policy.env, engineEnv, {
      HTTP_PROXY: proxyUrl,
      HTTPS_PROXY: proxyUrl,
      http_proxy: proxyUrl,
      https_proxy: proxyUrl,
      NO_PROXY: noProxy,
      no_proxy: noProxy,
      SSL_CERT_FILE: SANDBOX_CA_BUNDLE,
      NODE_EXTRA_CA_CERTS: SANDBOX_CA_FILE,
      REQUESTS_CA_BUNDLE: SANDBOX_CA_BUNDLE,
      CURL_CA_BUNDLE: SANDBOX_CA_BUNDLE,
      AWS_CA_BUNDLE: SANDBOX_CA_BUNDLE,
      GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: SANDBOX_CA_BUNDLE,
      GIT_SSL_CAINFO: SANDBOX_CA_BUNDLE,
      PIP_CERT: SANDBOX_CA_BUNDLE,
      CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE: SANDBOX_CA_BUNDLE,
    });
  }

  /** Hands a listener of the namespace to the data plane (`supervisor/dispatch.ts` routes its connections). */
  private serve(port: number, server: net.Server): void {
    const raw = port !== 80 && port !== 443 && port !== this.rt.settings.proxyPort;
    // Raw tunnels keep half-closed connections working (the property net.Server reads for new sockets).
    if (raw) (server as net.Server & { allowHalfOpen: boolean }).allowHalfOpen = true;
    this.rt.plane.serveListener(this.target.sandboxId, port, server);
  }

  /** Applies a new proxy_config at once; opens/closes raw-port listeners; deletes replaced sealed values. */
  update(stored: unknown): Promise<void> {
    const run = this.updating.then(async () => {
      if (this.closed) return;
      // Prepared, not attached yet: the attach applies it once the listeners are up.
      if (!this.attached) {
        this.pending = { stored };
        return;
      }
      const { workspaceId } = this.target;
      const netnsPid = this.netnsPid;
      const compiled = await this.rt.resolveConfig(workspaceId, stored);
      const policy = policyOf(compiled);
      const oldRefs = new Set(this.rt.storedRefs(this.stored));
      const newRefs = new Set(this.rt.storedRefs(stored));
      const wanted = new Set([80, 443, this.rt.settings.proxyPort, ...policy.rawPorts()]);
      const missing = [...wanted].filter((p) => !this.listeners.tcp.has(p));
      if (missing.length) {
        const more = await openNamespaceListeners(netnsPid, { tcp: missing, dns: false });
        for (const [port, server] of more.tcp) {
          this.listeners.tcp.set(port, server);
          this.serve(port, server);
        }
      }
      const engines = this.rt.enginesFor({ id: this.target.sandboxId, workspaceId }, policy);
      this.spec = { ...this.spec!, compiled };
      this.rt.plane.upsertSandbox(this.spec);
      for (const [port, server] of this.listeners.tcp) {
        if (!wanted.has(port)) {
          this.rt.plane.closeListener(this.target.sandboxId, port);
          server.close();
          this.listeners.tcp.delete(port);
        }
      }
      this.stored = stored;
      this.keys = null;
      Object.assign(this.files, engines.files);
      this.setEnv(policy, engines.env);
      await deleteValues(
        this.rt.deps.db,
        workspaceId,
        [...oldRefs].filter((r) => !newRefs.has(r)),
      );
    });
    // The caller gets `run` and its failure; the next update only waits for this one to end.
    this.updating = run.catch(() => undefined);
    return run;
  }

  async detach(): Promise<void> {
    this.closed = true;
    this.untrack?.();
    for (const s of this.listeners.tcp.values()) s.close();
    for (const u of this.listeners.udp) {
      try {
        u.close();
      } catch {
        // Already closed (ERR_SOCKET_DGRAM_NOT_RUNNING): nothing to release.
      }
    }
    this.listeners = { tcp: new Map(), udp: [], errors: [] };
    if (this.spec) this.rt.plane.removeSandbox(this.target.sandboxId, this.owner);
    this.spec = null;
  }
}
