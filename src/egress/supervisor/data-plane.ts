import net from "node:net";
import type { Logger } from "../../log/logger.ts";
import type { AuditEvent, AuditSink } from "../audit/audit-log.ts";
import type { StoredConfigV1 } from "../config/stored-config.ts";
import type { EgressSettings } from "../egress-settings.ts";
import { SandboxPolicy } from "../policy/policy.ts";
import type { CaMaterial } from "../proxy/certificates.ts";
import { LeafMinter } from "../proxy/certificates.ts";
import { EgressProxy, type RequestAuthorizer } from "../proxy/egress-proxy.ts";
import { dispatchAccepted, type ListenerRole } from "./dispatch.ts";

/** A sandbox's rules as the data plane needs them: the stored config with every value resolved. */
export interface CompiledConfig {
  cfg: StoredConfigV1 | null;
  secrets: Array<[string, string]>;
  sealed: Array<[string, string]>;
}

export interface SandboxSpec {
  id: string;
  workspaceId: string;
  ca: CaMaterial;
  compiled: CompiledConfig;
  /** The attachment that registered it: removal by an older attachment leaves a newer one alone. */
  owner?: string;
}

/** Builds a sandbox's credential engines from its policy (the cloud engines, installed by the feature). */
export type EngineFactory = (
  sandbox: { id: string; workspaceId: string },
  policy: SandboxPolicy,
  audit: (e: Omit<AuditEvent, "sandboxId" | "workspaceId">) => void,
) => { authorizers: RequestAuthorizer[] };

export function policyOf(compiled: CompiledConfig): SandboxPolicy {
  if (!compiled.cfg) return SandboxPolicy.empty();
  return new SandboxPolicy(compiled.cfg, { secrets: new Map(compiled.secrets), sealed: new Map(compiled.sealed) });
}

/**
 * What the control plane asks of the egress data plane. One implementation runs in this process
 * (`LocalDataPlane`); the supervised one runs it in a child process and restarts it after a crash.
 */
export interface DataPlane {
  /** Adds a sandbox or replaces its rules (the next request on any connection reads them). */
  upsertSandbox(spec: SandboxSpec): void;
  removeSandbox(id: string, owner?: string): void;
  /** Names the sandbox's DNS stub handed out (fake address → name). */
  addNames(id: string, pairs: Array<[address: string, name: string]>): void;
  /** Serves a listener of the sandbox's namespace; `role` says what its connections speak. */
  serveListener(id: string, port: number, server: net.Server, role?: ListenerRole): void;
  /** Stops serving a listener the rules no longer need (the caller closes its own copy). */
  closeListener(id: string, port: number): void;
  addSelfEndpoint(address: string, port: number): void;
  close(): Promise<void>;
}

/** The accept queue a listener keeps (what the sandbox holder listens with): connections wait there between two data-plane children. */
const ACCEPT_QUEUE = 1024;

interface LocalSandbox {
  spec: SandboxSpec;
  names: Map<string, string>;
  listeners: Map<number, net.Server>;
}

/**
 * The data plane in this process: the proxy, each sandbox's names, and the engines built from its
 * policy. The supervised child runs exactly this.
 */
export class LocalDataPlane implements DataPlane {
  readonly proxy: EgressProxy;
  private readonly sandboxes = new Map<string, LocalSandbox>();
  private readonly minters = new Map<string, LeafMinter>();

  constructor(
    private readonly settings: EgressSettings,
    private readonly audit: AuditSink,
    private readonly engines: () => EngineFactory | null,
    log: Logger | null = null,
  ) {
    this.proxy = new EgressProxy({ settings, audit, log });
  }

  /** One minter (and leaf cache) per CA, shared by the workspace's sandboxes. */
  private minterFor(ca: CaMaterial): LeafMinter {
    let m = this.minters.get(ca.certPem);
    if (!m) {
      m = new LeafMinter({ ...ca, notAfter: new Date(ca.notAfter) });
      this.minters.set(ca.certPem, m);
    }
    return m;
  }

  upsertSandbox(spec: SandboxSpec): void {
    const policy = policyOf(spec.compiled);
    const sandbox = { id: spec.id, workspaceId: spec.workspaceId };
    const audit = (e: Omit<AuditEvent, "sandboxId" | "workspaceId">) =>
      this.audit.record({ ...e, sandboxId: spec.id, workspaceId: spec.workspaceId } as AuditEvent);
    const authorizers = this.engines()?.(sandbox, policy, audit).authorizers ?? [];
    const known = this.sandboxes.get(spec.id);
    if (known && this.proxy.getSandbox(spec.id)) {
      known.spec = spec;
      this.proxy.setPolicy(spec.id, policy, authorizers);
      return;
    }
    this.sandboxes.set(spec.id, { spec, names: known?.names ?? new Map(), listeners: known?.listeners ?? new Map() });
    this.proxy.addSandbox({ ...sandbox, policy, minter: this.minterFor(spec.ca), authorizers });
  }

  removeSandbox(id: string, owner?: string): void {
    const sb = this.sandboxes.get(id);
    if (!sb || (owner && sb.spec.owner !== owner)) return;
    this.sandboxes.delete(id);
    for (const s of sb.listeners.values()) s.close();
    this.proxy.removeSandbox(id);
  }

  addNames(id: string, pairs: Array<[string, string]>): void {
    const sb = this.sandboxes.get(id);
    if (sb) for (const [address, name] of pairs) sb.names.set(address, name);
  }

  serveListener(id: string, port: number, server: net.Server, role: ListenerRole = { kind: "namespace" }): void {
    const sb = this.sandboxes.get(id);
    if (!sb) return void server.close();
    sb.listeners.get(port)?.close();
    sb.listeners.set(port, server);
    // Raw tunnels keep half-closed connections working (the property net.Server reads for new sockets).
    if (this.isRawPort(port, role)) (server as net.Server & { allowHalfOpen: boolean }).allowHalfOpen = true;
    server.on("connection", (socket: net.Socket) => this.accept(id, port, socket, role));
    // A listener's own errors (EMFILE on accept) must not end the process; the next accept retries.
    server.on("error", () => {
      // An accept error on a listener the control plane holds a copy of: the next child takes over.
    });
  }

  /** Accepts on a listening socket handed over as Node's native handle (the supervisor's own copy stays with it). */
  listenOn(
    id: string,
    port: number,
    handle: object & { close(): void },
    role: ListenerRole = { kind: "namespace" },
  ): void {
    if (!this.sandboxes.has(id)) return void handle.close();
    const server = net.createServer();
    this.serveListener(id, port, server, role);
    server.listen(handle, ACCEPT_QUEUE);
  }

  /** A connection accepted on one of the sandbox's listeners (here or by the supervisor). */
  accept(id: string, port: number, socket: net.Socket, role: ListenerRole = { kind: "namespace" }): void {
    const sb = this.sandboxes.get(id);
    if (!sb) return void socket.destroy();
    // A socket accepted by the supervisor arrives without its listener's half-open setting.
    if (this.isRawPort(port, role)) socket.allowHalfOpen = true;
    dispatchAccepted(this.proxy, { id, proxyPort: this.settings.proxyPort, names: sb.names }, port, socket, role);
  }

  private isRawPort(port: number, role: ListenerRole): boolean {
    return role.kind === "namespace" && port !== 80 && port !== 443 && port !== this.settings.proxyPort;
  }

  closeListener(id: string, port: number): void {
    const sb = this.sandboxes.get(id);
    const s = sb?.listeners.get(port);
    if (!s) return;
    sb!.listeners.delete(port);
    s.close();
  }

  addSelfEndpoint(address: string, port: number): void {
    this.proxy.addSelfEndpoint(address, port);
  }

  async close(): Promise<void> {
    for (const id of [...this.sandboxes.keys()]) this.removeSandbox(id);
    await this.proxy.close();
  }
}
