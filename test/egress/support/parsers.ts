import type { TestContext } from "node:test";
import { HTTPParser } from "../../../src/egress/proxy/http1/llhttp.ts";

type Proto = { initialize: (...a: unknown[]) => void; close: () => void };

/**
 * Watches llhttp parsers for the rest of the test: `live` holds the ones `mine` picks at
 * initialization (type, resource, head limit) until they are closed, `closed` counts those closes.
 */
export function watchParsers(
  t: TestContext,
  mine: (type: number, maxHeaderSize: number) => boolean,
): { live: Set<object>; closed: () => number } {
  const proto = (HTTPParser as unknown as { prototype: Proto }).prototype;
  const { initialize, close } = proto;
  const live = new Set<object>();
  let closed = 0;
  proto.initialize = function (this: object, ...a: unknown[]) {
    if (mine(a[0] as number, Number(a[2]))) live.add(this);
    return initialize.apply(this, a);
  };
  proto.close = function (this: object) {
    if (live.delete(this)) closed++;
    return close.apply(this);
  };
  t.after(() => Object.assign(proto, { initialize, close }));
  return { live, closed: () => closed };
}

export { HTTPParser };
