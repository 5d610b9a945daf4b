import type { ChildProcess } from "node:child_process";
import type dgram from "node:dgram";
import type net from "node:net";
import type { CapturedNetwork } from "./network.ts";

/**
 * The platform's side of the listener handover (perl/listener-handover.pl, run by the sandbox
 * holder at creation and the capture helper at re-adoption, opens the egress proxy's listeners in
 * the namespace and passes each over Node's IPC channel, then says `{"kind":"done"}`): records each listener the holder passes over `child`'s IPC
 * channel in `captured` (by kind), errors as text, and `done` once the holder says so.
 */
export function receiveListeners(child: ChildProcess, captured: CapturedNetwork & { done: boolean }): void {
  child.on("message", (msg: { kind: string; port?: number; family?: string; message?: string }, handle: unknown) => {
    if (msg.kind === "tcp" && handle) captured.tcp.set(msg.port!, handle as net.Server);
    else if (msg.kind === "udp" && handle) captured.udp.push(handle as dgram.Socket);
    else if (msg.kind === "error") captured.errors.push(`${msg.family ?? "tcp"} port ${msg.port}: ${msg.message}`);
    else if (msg.kind === "done") captured.done = true;
  });
  // The holder closes its end once done; a channel error (the holder died) shows as its exit.
  child.on("error", () => {
    // Seen as the holder's exit, which its starter waits for.
  });
}
