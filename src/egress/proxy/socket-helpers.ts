import type net from "node:net";
import type { SandboxHandle } from "./types.ts";

/** An `error` listener shared by every socket whose errors (a reset from the sandbox) are routine. */
export function destroySelf(this: net.Socket): void {
  this.destroy();
}

export function track(sb: SandboxHandle, socket: net.Socket): void {
  sb.sockets.add(socket);
  socket.once("close", () => sb.sockets.delete(socket));
}

/** Reads from a paused socket until at least `n` bytes are buffered; null on end/timeout. */
export function readAtLeast(socket: net.Socket, n: number, timeoutMs: number): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (value: Buffer | null) => {
      clearTimeout(timer);
      socket.off("readable", onReadable);
      socket.off("end", onEnd);
      socket.off("close", onEnd);
      socket.off("error", onEnd);
      resolve(value);
    };
    const onReadable = () => {
      let chunk: Buffer | null;
      while ((chunk = socket.read() as Buffer | null) !== null) {
        chunks.push(chunk);
        size += chunk.length;
      }
      if (size >= n) finish(Buffer.concat(chunks));
    };
    const onEnd = () => finish(size >= n ? Buffer.concat(chunks) : null);
    const timer = setTimeout(() => finish(null), timeoutMs);
    socket.on("readable", onReadable);
    socket.once("end", onEnd);
    socket.once("close", onEnd);
    socket.once("error", onEnd);
    onReadable();
  });
}
