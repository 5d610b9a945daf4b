import type net from "node:net";

/** Joins two connections both ways; either one ending or failing ends both. */
export function splice(a: net.Socket, b: net.Socket): void {
  const end = () => {
    a.destroy();
    b.destroy();
  };
  for (const s of [a, b]) {
    s.on("error", end);
    s.on("close", end);
  }
  a.pipe(b).pipe(a);
}
