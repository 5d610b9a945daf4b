import type dgram from "node:dgram";
import type net from "node:net";

/** Listening sockets opened inside a confined process's network namespace, owned by the platform process. */
export interface CapturedNetwork {
  tcp: Map<number, net.Server>;
  udp: dgram.Socket[];
  errors: string[];
}
