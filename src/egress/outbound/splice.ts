import type net from "node:net";

/**
 * Joins two connections both ways. One side closing ends the other gracefully (what it still
 * buffers is delivered first: destroying it would cut a response short); an error ends both.
 */
export function splice(a: net.Socket, b: net.Socket): void {
  const fail = () => {
    a.destroy();
    b.destroy();
  };
  for (const [s, other] of [
    [a, b],
    [b, a],
  ] as const) {
    s.on("error", fail);
    s.on("close", () => other.end());
  }
  a.pipe(b).pipe(a);
}
