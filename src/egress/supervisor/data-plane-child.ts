// The egress data plane as its own process, started and restarted by `SupervisedDataPlane`. It
// accepts on every sandbox's listeners (the control plane keeps a copy of each for the next child)
// and serves the few connections the control plane accepted before that, with each sandbox's rules
// and sealed values (sent again after a restart), and sends audit events back. A crash here costs
// only the connections in flight; the control plane keeps answering.
import type net from "node:net";
import { AuditBatch } from "../audit/audit-batch.ts";
import type { AuditEvent } from "../audit/audit-log.ts";
import { createCloudAuthorizerFactory } from "../credentials/cloud-authorizer.ts";
import { loadEgressSettings, type EgressSource } from "../egress-settings.ts";
import { LocalDataPlane } from "./data-plane.ts";
import type { FromDataPlane, ToDataPlane } from "./messages.ts";

const send = (m: FromDataPlane) => process.send?.(m);

const batch = new AuditBatch();
const flushAudit = () => {
  if (batch.size) send({ t: "audit", events: batch.take() });
};
const audit = {
  record(event: AuditEvent): void {
    // Batched and folded: one IPC message per burst, one entry per distinct event in it.
    if (batch.add(event)) setTimeout(flushAudit, 20);
    else if (batch.size >= 1000) flushAudit();
  },
};

// Made from the settings the control plane sends first (never from this process's environment).
let plane: LocalDataPlane;
function start(source: EgressSource): void {
  const settings = loadEgressSettings(source);
  const local: LocalDataPlane = new LocalDataPlane(settings, audit, () => factory, null);
  const factory = createCloudAuthorizerFactory({ targets: local.proxy.targets, settings });
  plane = local;
  send({ t: "ready" });
}

type NativeHandle = object & { close(): void };

process.on("message", (m: ToDataPlane, handle?: net.Socket | NativeHandle) => {
  switch (m.t) {
    case "settings":
      return start(m.source);
    case "sandbox":
      return plane.upsertSandbox(m.spec);
    case "remove":
      return plane.removeSandbox(m.id);
    case "names":
      return plane.addNames(m.id, m.pairs);
    case "listen":
      return handle ? plane.listenOn(m.id, m.port, handle as NativeHandle, m.role) : undefined;
    case "copy":
      // Sent straight back: the control plane keeps this second descriptor of the listening socket.
      if (handle)
        process.send?.({ t: "listener", id: m.id, port: m.port } satisfies FromDataPlane, handle as net.Socket, () =>
          (handle as NativeHandle).close(),
        );
      return;
    case "unlisten":
      return plane.closeListener(m.id, m.port);
    case "conn":
      // Acknowledged first: from now on the connection is this process's (and lost with it).
      send({ t: "ack", seq: m.seq });
      return handle ? plane.accept(m.id, m.port, handle as net.Socket, m.role) : undefined;
    case "self":
      return plane.addSelfEndpoint(m.address, m.port);
  }
});
// The control plane went away: nothing left to serve.
process.on("disconnect", () => process.exit(0));
