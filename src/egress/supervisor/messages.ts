import type { EgressSource } from "../egress-settings.ts";
import type { AuditEvent } from "../audit/audit-log.ts";
import type { SandboxSpec } from "./data-plane.ts";
import type { ListenerRole } from "./dispatch.ts";

/** Control plane → data-plane process (over Node's IPC channel; listeners and sockets ride along). */
export type ToDataPlane =
  | { t: "settings"; source: EgressSource }
  | { t: "sandbox"; spec: SandboxSpec }
  | { t: "remove"; id: string }
  | { t: "names"; id: string; pairs: Array<[string, string]> }
  | { t: "listen"; id: string; port: number; role: ListenerRole }
  | { t: "copy"; id: string; port: number }
  | { t: "unlisten"; id: string; port: number }
  | { t: "conn"; id: string; port: number; role: ListenerRole; seq: number }
  | { t: "self"; address: string; port: number };

/** Data-plane process → control plane. */
export type FromDataPlane =
  | { t: "ready" }
  | { t: "audit"; events: AuditEvent[] }
  | { t: "ack"; seq: number }
  | { t: "listener"; id: string; port: number };
