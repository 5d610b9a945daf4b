import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import type { WharfConfig } from "../config/index.ts";
import type { SecretBox } from "../crypto/secret-box.ts";
import type { Logger } from "../log/logger.ts";
import type { Store } from "../store/database.ts";
import { forwardRequest, forwardUpgrade, refuseUpgrade, sendControlCall, type ControlCall } from "./forwarder.ts";
import { KEY_PURPOSE, NonceCache, REPLICA_AUTH_HEADER, signRequest, verifyRequest } from "./replica-auth.ts";
import { readReplicaId } from "./replica-id.ts";
import { ReplicaRegistry } from "./replica-registry.ts";

/**
 * Which replica must serve a request target (path and query, tenant hosts already routed to their
 * path form): null synchronously for targets that are not a workload's, else the owner's replica
 * id (null when it is this replica or nobody).
 */
export type WorkloadOwner = (target: string) => Promise<string | null> | null;

/** What features see of replica mode. */
export interface ClusterView {
  replicaId: string;
  /** This replica's internal listener (egress keeps sandboxes away from it). */
  internalUrl(): string;
  /** Other replicas whose lease ran out (their running workloads are lost). */
  deadReplicas(): Promise<string[]>;
  /**
   * A control-plane call on a workload owned by `owner`: the owner's answer when that is another
   * live replica and the call did not already come from one (`incoming`, the node request), else
   * null and the caller acts here.
   */
  forwardCall(
    owner: string | null,
    call: ControlCall,
    incoming: http.IncomingMessage | undefined,
  ): Promise<Response | null>;
}

/** Marks a workload upgrade that was decided here and emitted again for the local handlers. */
const DECIDED = Symbol("wharf.cluster.decided");
/** What the local upgrade handlers see while the owner is looked up: a target none of them matches. */
const DECIDING = "/.wharf-cluster-deciding";

/** Marks a request that came through the internal listener: it is served here, never sent on. */
const FORWARDED = Symbol("wharf.cluster.forwarded");

type Marked = http.IncomingMessage & { [DECIDED]?: true; [FORWARDED]?: true };

export class Cluster implements ClusterView {
  private readonly nonces = new NonceCache();
  private internal: http.Server | null = null;
  private listeningUrl = "";

  constructor(
    readonly replicaId: string,
    private readonly registry: ReplicaRegistry,
    private readonly box: SecretBox,
    private readonly log: Logger,
    private readonly listen: { host: string; port: number },
    private readonly advertised: string | undefined,
  ) {}

  internalUrl(): string {
    return this.advertised ?? this.listeningUrl;
  }

  deadReplicas(): Promise<string[]> {
    return this.registry.deadReplicas();
  }

  async forwardCall(owner: string | null, call: ControlCall, incoming: Marked | undefined): Promise<Response | null> {
    if (!isAnotherReplicas(owner, this.replicaId, Boolean(incoming?.[FORWARDED]))) return null;
    const addr = await this.registry.lookup(owner);
    // An owner whose lease ran out leaves the workload to this replica (a stopped sandbox starts here).
    if (!addr?.alive) return null;
    return sendControlCall(call, addr.url, this.authHeader(owner, call.method, call.target));
  }

  private authHeader(to: string, method: string, target: string): Record<string, string> {
    const keyFor = () => ({ kid: this.box.activeKeyId, key: this.box.deriveKey(KEY_PURPOSE) });
    return { [REPLICA_AUTH_HEADER]: signRequest(keyFor, { from: this.replicaId, to, method, target }, Date.now()) };
  }

  /** The owner's internal URL when the target belongs to a live replica other than this one. */
  private async remoteOwner(pendingOwners: Array<Promise<string | null>>): Promise<{ id: string; url: string } | null> {
    for (const pending of pendingOwners) {
      const id = await pending;
      if (!id || id === this.replicaId) continue;
      const addr = await this.registry.lookup(id);
      // A dead owner: the local handlers answer (the workload is reported lost or taken over).
      if (!addr || !addr.alive) return null;
      return { id, url: addr.url };
    }
    return null;
  }

  private pendingOwners(owners: WorkloadOwner[], target: string): Array<Promise<string | null>> {
    const out: Array<Promise<string | null>> = [];
    for (const o of owners) {
      const p = o(target);
      if (p) out.push(p);
    }
    return out;
  }

  /** The public listener: workload requests whose owner is another live replica are forwarded there. */
  wrapListener(inner: http.RequestListener, owners: WorkloadOwner[]): http.RequestListener {
    return (req, res) => {
      const target = req.url ?? "/";
      const pending = this.pendingOwners(owners, target);
      if (pending.length === 0) return inner(req, res);
      this.remoteOwner(pending).then(
        (remote) => {
          if (!remote) return inner(req, res);
          forwardRequest(req, res, remote.url, this.authHeader(remote.id, req.method ?? "GET", target));
        },
        (err: Error) => {
          this.log.error({ err }, "cannot find the replica of a workload");
          inner(req, res);
        },
      );
    };
  }

  /**
   * The public server's upgrades (WebSockets of the execute endpoint and of sandbox services): a
   * workload's is held back from the local handlers while its owner is looked up, then forwarded,
   * or emitted again for them. Installed after tenant routing and before the features' handlers.
   */
  interceptUpgrades(server: http.Server, owners: WorkloadOwner[]): void {
    server.on("upgrade", (req: Marked, socket: Duplex, head: Buffer) => {
      if (req[DECIDED]) return;
      const target = req.url ?? "/";
      const pending = this.pendingOwners(owners, target);
      if (pending.length === 0) return;
      req.url = DECIDING;
      socket.on("error", () => socket.destroy()); // the client left while the owner was looked up
      this.remoteOwner(pending)
        .catch((err: Error) => {
          this.log.error({ err }, "cannot find the replica of a workload");
          return null;
        })
        .then((remote) => {
          req.url = target;
          if (remote)
            return forwardUpgrade(
              req,
              socket,
              head,
              remote.url,
              this.authHeader(remote.id, req.method ?? "GET", target),
            );
          req[DECIDED] = true;
          server.emit("upgrade", req, socket, head);
        })
        .catch((err: Error) => {
          // A handler that threw on the re-emitted upgrade: this connection ends, the server goes on.
          this.log.error({ err }, "cannot hand over a workload's upgrade");
          socket.destroy();
        });
    });
  }

  private verify(req: http.IncomingMessage): string | null {
    const header = req.headers[REPLICA_AUTH_HEADER];
    const keyFor = (kid: string) => {
      try {
        return this.box.deriveKey(KEY_PURPOSE, kid);
      } catch {
        return null; // a master key this replica does not hold: refused below
      }
    };
    const verdict = verifyRequest(
      keyFor,
      Array.isArray(header) ? header[0] : header,
      { self: this.replicaId, method: req.method ?? "GET", target: req.url ?? "/" },
      Date.now(),
      (n, exp) => this.nonces.seen(n, exp),
    );
    stripHeader(req, REPLICA_AUTH_HEADER);
    if (verdict.ok) return null;
    this.log.warn(
      { reason: verdict.reason, from: req.socket.remoteAddress, target: req.url },
      "refused a request on the internal listener",
    );
    return verdict.reason;
  }

  /**
   * The internal listener: only requests signed by another replica, handed to the same app and
   * upgrade handlers as the public ones (`attach` registers those), with no forwarding of its own.
   */
  async serveInternal(listener: http.RequestListener, attach: (server: http.Server) => void): Promise<void> {
    const server = http.createServer({ requestTimeout: 0 }, (req: Marked, res) => {
      const refused = this.verify(req);
      if (refused) {
        const body = JSON.stringify({ detail: `Not a signed request from another replica (${refused})` });
        res.writeHead(401, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
        req.resume();
        return;
      }
      req[FORWARDED] = true;
      listener(req, res);
    });
    server.on("upgrade", (req: http.IncomingMessage, socket: Duplex) => {
      const refused = this.verify(req);
      if (!refused) return;
      req.url = DECIDING; // the handlers after this one leave it alone
      refuseUpgrade(socket, 401, `Not a signed request from another replica (${refused})`);
    });
    attach(server);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.listen.port, this.listen.host, () => resolve());
    }).catch((err: Error) => {
      throw new Error(
        `cannot listen on WHARF_INTERNAL_LISTEN ${this.listen.host}:${this.listen.port}: ${err.message}`,
        { cause: err },
      );
    });
    const addr = server.address() as AddressInfo;
    this.listeningUrl = `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}`;
    this.internal = server;
    await this.registry.register();
    this.log.info({ replica: this.replicaId, internal: this.internalUrl() }, "replica registered");
  }

  async stop(): Promise<void> {
    this.registry.stop();
    const s = this.internal;
    if (!s) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }
}

/**
 * Removes a header from both views of the request: the app's adapter builds its headers from
 * `rawHeaders`, so the signature never reaches handlers, sandboxes' services or agent servers.
 */
function stripHeader(req: http.IncomingMessage, name: string): void {
  delete req.headers[name];
  const raw = req.rawHeaders;
  for (let i = raw.length - 2; i >= 0; i -= 2) if (raw[i].toLowerCase() === name) raw.splice(i, 2);
}

/**
 * Whether a control-plane call on a workload is for its owner to answer (then looked up in the
 * registry): not without an owner, not when it is this replica, and never again for a call that
 * came through the internal listener (no loops, whatever the replicas believe about the owner).
 */
export function isAnotherReplicas(owner: string | null, self: string, forwarded: boolean): owner is string {
  return Boolean(owner) && owner !== self && !forwarded;
}

/** `host:port` (IPv6 in brackets). */
export function parseListen(value: string): { host: string; port: number } {
  const i = value.lastIndexOf(":");
  return { host: value.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(value.slice(i + 1)) };
}

/** Replica mode when `WHARF_INTERNAL_LISTEN` is set (PostgreSQL only); null otherwise, at no cost. */
export function createCluster(config: WharfConfig, store: Store, box: SecretBox, log: Logger): Cluster | null {
  const listen = config.settings.WHARF_INTERNAL_LISTEN;
  if (!listen) return null;
  if (store.dialect !== "postgres")
    throw new Error(
      "WHARF_INTERNAL_LISTEN (replica mode) needs PostgreSQL: set DATABASE_URL=postgres://… shared by every replica",
    );
  const id = readReplicaId(config.home);
  const parsed = parseListen(listen);
  const advertised = config.settings.WHARF_REPLICA_URL ?? (parsed.port !== 0 ? `http://${listen}` : undefined);
  // Port 0 (tests): the URL is known once it listens; the registry row is written after that.
  let cluster: Cluster | null = null;
  const registry = new ReplicaRegistry(
    store.db,
    id,
    () => cluster!.internalUrl(),
    config.settings.WHARF_REPLICA_LEASE_MS,
    log,
  );
  cluster = new Cluster(id, registry, box, log, parsed, advertised);
  return cluster;
}
