import { randomFillSync } from "node:crypto";

/** Bytes drawn from the system's random source at once. */
const POOL_BYTES = 4096;
/** Requests up to this size are served from the pool; larger ones go to Node's own call. */
const MAX_POOLED = 256;
const POOLED = Symbol.for("wharf.pooledGetRandomValues");

/**
 * Serves `crypto.getRandomValues` for small byte arrays from a pool refilled 4 KiB at a time.
 * LangChain and LangSmith draw 16 random bytes per UUID, about fifteen times per graph run (a
 * RunTree per node call, write and branch, a checkpoint id per step), and each of Node's calls
 * costs far more than the bytes (measured: 15 % of a one-node graph's CPU under 16 concurrent
 * runs). The bytes are the same CSPRNG's, drawn in bulk, as Node itself does for `randomUUID`;
 * a byte handed out is wiped from the pool. Anything else (other array types, larger requests,
 * errors) is Node's own behaviour. Idempotent; process-wide, as the libraries read the global.
 */
export function installPooledRandom(): void {
  const c = globalThis.crypto as Crypto & { getRandomValues: { [POOLED]?: true } };
  if (!c || c.getRandomValues[POOLED]) return;
  const original = c.getRandomValues.bind(c);
  const pool = new Uint8Array(POOL_BYTES);
  let offset = POOL_BYTES;
  const getRandomValues = <T extends ArrayBufferView | null>(array: T): T => {
    if (!(array instanceof Uint8Array) || array.byteLength > MAX_POOLED) return original(array as never) as T;
    const n = array.byteLength;
    if (offset + n > POOL_BYTES) {
      randomFillSync(pool);
      offset = 0;
    }
    array.set(pool.subarray(offset, offset + n));
    pool.fill(0, offset, offset + n);
    offset += n;
    return array;
  };
  Object.defineProperty(getRandomValues, POOLED, { value: true });
  Object.defineProperty(c, "getRandomValues", { value: getRandomValues, writable: true, configurable: true });
}
