// Runs inside a sandbox's network namespace (started through `nsenter --net=…`), binds the
// listening sockets the egress proxy needs there, hands each one to the parent (the platform
// process) over Node's IPC channel, and exits. The parent then owns listeners inside the
// namespace and knows the sandbox by the listener that accepted a connection. Plain JavaScript so
// it starts fast without a TypeScript loader.
//
// argv: a JSON object {"tcp":[ports…],"dns":true|false}
import dgram from "node:dgram";
import net from "node:net";

const spec = JSON.parse(process.argv[2] ?? "{}");
const pending = [];

function send(message, handle) {
  return new Promise((resolve) => process.send(message, handle, { keepOpen: false }, () => resolve()));
}

function listenTcp(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    const tryHost = (host, ipv6Only) => {
      server.once("error", (err) => {
        if (host === "::") return tryHost("0.0.0.0", false); // IPv6 disabled in this namespace
        resolve(send({ kind: "error", port, message: `${err.code ?? ""} ${err.message}` }));
      });
      server.listen({ host, port, ipv6Only, backlog: 1024 }, () => resolve(send({ kind: "tcp", port }, server)));
    };
    tryHost("::", false);
  });
}

function listenUdp(type, host) {
  return new Promise((resolve) => {
    const socket = dgram.createSocket({ type, ipv6Only: type === "udp6" });
    socket.once("error", (err) =>
      resolve(send({ kind: "error", port: 53, family: type, message: `${err.code ?? ""} ${err.message}` })),
    );
    socket.bind(53, host, () => resolve(send({ kind: "udp", family: type }, socket)));
  });
}

for (const port of spec.tcp ?? []) pending.push(listenTcp(port));
if (spec.dns) {
  pending.push(listenUdp("udp4", "0.0.0.0"));
  pending.push(listenUdp("udp6", "::"));
}
await Promise.all(pending);
await send({ kind: "done" });
// Our copies of the sockets must go: a datagram socket is not closed by the handle transfer, and a
// second reader of the DNS socket would steal queries. Exiting closes every descriptor.
process.exit(0);
