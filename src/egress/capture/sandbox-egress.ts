import fs from "node:fs";
import type net from "node:net";
import tls from "node:tls";
import { classifyAddress } from "../policy/address-class.ts";
import { canonicalHost } from "../policy/canonical-host.ts";
import type { SandboxHandle } from "../proxy/egress-proxy.ts";
import type { EgressRuntime } from "../egress-runtime.ts";
import { FakeDns, isFakeAddress } from "./fake-dns.ts";
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
      } catch {}
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
export class SandboxEgress {
  readonly env: Record<string, string> = {};
  readonly files: Record<string, string> = {};
  private listeners: NamespaceListeners = { tcp: new Map(), udp: [], errors: [] };
  private readonly dns = new FakeDns();
  private handle: SandboxHandle | null = null;
  private stored: unknown;
  private closed = false;
  private updating: Promise<void> = Promise.resolve();

  constructor(
    private readonly rt: EgressRuntime,
    private readonly target: AttachTarget,
  ) {
    this.stored = target.proxyConfig;
  }

  /**
   * `prepared`: listeners (and routes) the sandbox driver set up while creating the namespace;
   * only raw ports this sandbox's allow_list opens are added, through the in-namespace helper.
   * Without them, everything is set up here.
   */
  async attach(prepared: NamespaceListeners | null = null): Promise<void> {
    const { sandboxId, workspaceId, netnsPid } = this.target;
    const minter = await this.rt.minterFor(workspaceId);
    const policy = await this.rt.compile(workspaceId, this.stored);
    const engines = this.rt.enginesFor({ id: sandboxId, workspaceId }, policy);
    this.handle = this.rt.proxy.addSandbox({ id: sandboxId, workspaceId, policy, minter, authorizers: engines.authorizers });
    try {
      const ports = [...new Set([80, 443, this.rt.settings.proxyPort, ...policy.rawPorts()])];
      if (prepared) {
        this.listeners = prepared;
        const missing = ports.filter((p) => !prepared.tcp.has(p));
        if (missing.length) for (const [port, server] of (await openNamespaceListeners(netnsPid, { tcp: missing, dns: false })).tcp) this.listeners.tcp.set(port, server);
      } else {
        await routeAllToLoopback(netnsPid);
        this.listeners = await openNamespaceListeners(netnsPid, { tcp: ports, dns: true });
      }
      if (!this.listeners.tcp.has(80) || !this.listeners.tcp.has(443) || !this.listeners.tcp.has(this.rt.settings.proxyPort)) {
        throw new Error(`cannot listen in the sandbox network: ${this.listeners.errors.join("; ")}`);
      }
      for (const [port, server] of this.listeners.tcp) this.serve(port, server);
      for (const u of this.listeners.udp) this.dns.serve(u);
    } catch (err) {
      await this.detach();
      throw err;
    }
    this.files[SANDBOX_CA_FILE] = minter.ca.certPem;
    this.files[SANDBOX_CA_BUNDLE] = systemRoots().trimEnd() + "\n" + minter.ca.certPem;
    this.files["/etc/resolv.conf"] = "nameserver 127.0.0.1\noptions timeout:2 attempts:2\n";
    Object.assign(this.files, engines.files);
    this.setEnv(policy, engines.env);
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

  /**
   * Dispatches a connection accepted inside the namespace by the address it was aimed at: the
   * explicit proxy port on loopback speaks the proxy protocol; a fake address maps back to its
   * name; any other address is an IP-literal destination. Loopback destinations are the sandbox's
   * own and are never forwarded, whatever the operator allows.
   */
  private serve(port: number, server: net.Server): void {
    const raw = port !== 80 && port !== 443 && port !== this.rt.settings.proxyPort;
    // Raw tunnels keep half-closed connections working (the property net.Server reads for new sockets).
    if (raw) (server as net.Server & { allowHalfOpen: boolean }).allowHalfOpen = true;
    server.on("connection", (socket: net.Socket) => {
      const id = this.target.sandboxId;
      const local = (socket.localAddress ?? "").replace(/^::ffff:(?=\d+\.)/, "");
      const localPort = socket.localPort ?? port;
      if (localPort === this.rt.settings.proxyPort && (local === "127.0.0.1" || local === "::1")) return this.rt.proxy.acceptExplicit(socket, id);
      if (isFakeAddress(local)) {
        const name = this.dns.nameFor(local);
        if (!name) return this.rt.proxy.refuse(socket, id, local, localPort, "address was not handed out by the sandbox's DNS");
        return this.rt.proxy.acceptTransparent(socket, id, { kind: "name", host: name }, localPort);
      }
      const host = canonicalHost(local);
      if (!host || classifyAddress(local) === "loopback") return this.rt.proxy.refuse(socket, id, local, localPort, "the sandbox's own loopback is not a way out");
      this.rt.proxy.acceptTransparent(socket, id, host, localPort);
    });
    server.on("error", () => {});
  }

  /** Applies a new proxy_config at once; opens/closes raw-port listeners; deletes replaced sealed values. */
  update(stored: unknown): Promise<void> {
    const run = this.updating.then(async () => {
      if (this.closed || !this.handle) return;
      const { workspaceId, netnsPid } = this.target;
      const policy = await this.rt.compile(workspaceId, stored);
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
      this.rt.proxy.setPolicy(this.target.sandboxId, policy, engines.authorizers);
      for (const [port, server] of this.listeners.tcp) {
        if (!wanted.has(port)) {
          server.close();
          this.listeners.tcp.delete(port);
        }
      }
      this.stored = stored;
      Object.assign(this.files, engines.files);
      this.setEnv(policy, engines.env);
      await deleteValues(this.rt.deps.db, workspaceId, [...oldRefs].filter((r) => !newRefs.has(r)));
    });
    this.updating = run.catch(() => {});
    return run;
  }

  async detach(): Promise<void> {
    this.closed = true;
    for (const s of this.listeners.tcp.values()) s.close();
    for (const u of this.listeners.udp) {
      try {
        u.close();
      } catch {}
    }
    this.listeners = { tcp: new Map(), udp: [], errors: [] };
    if (this.handle) this.rt.proxy.removeSandbox(this.target.sandboxId, this.handle);
    this.handle = null;
  }
}
