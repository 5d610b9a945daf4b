import { createRequire } from "node:module";

/*
 * Node's own native llhttp binding, as its `http` module reaches it (`process.binding` warns). The
 * data plane's HTTP/1.1 front and upstream client parse with it directly: the same strict parser
 * (no lenient flags) without the request/response objects and streams of `http` around it.
 *
 * Why an internal module: it is the only llhttp with a JavaScript interface that ships with Node.
 * The `llhttp` npm package is the parser's generator (TypeScript that emits C), not a parser one
 * can call; the WebAssembly build inside undici is undici's own internal too, and crosses into
 * WebAssembly and copies each chunk into its memory, where this binding parses the Buffer in place.
 * What the front and client rely on (exports, callback slots and argument positions, return
 * codes, errors, head limit, strictness) is pinned by test/egress/llhttp-binding.test.ts, in the
 * unit tier CI runs on every supported Node: a release that changes it fails there.
 */

export interface NativeParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  execute(data: Buffer): number | (Error & { code?: string; bytesParsed?: number });
  finish(): number | (Error & { code?: string }) | undefined;
  /**
   * Deletes the native parser. Node keeps every parser's native object alive until this is called
   * (about 2.4 KiB each, and its JavaScript object with it), so each one is closed with its
   * connection; never from inside one of its own callbacks.
   */
  close(): void;
  [callback: number]: unknown;
}

interface NativeParserClass {
  new (): NativeParser;
  REQUEST: number;
  RESPONSE: number;
  kOnMessageBegin: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
}

const common = createRequire(import.meta.url)("_http_common") as { HTTPParser: NativeParserClass; methods: string[] };

export const HTTPParser = common.HTTPParser;
/** Method names by llhttp's method number (what `kOnHeadersComplete` passes). */
export const METHODS = common.methods;
