import { Readable } from "node:stream";
import busboy from "busboy";
import { ValidationFailed } from "../../http/errors.ts";

const notMultipart = () =>
  new ValidationFailed([
    { loc: ["body", "file"], msg: "Expected a multipart/form-data body with a file field", type: "missing" },
  ]);

/**
 * Streams the named file part of a multipart/form-data request into `consume` as it arrives, so an
 * upload of any size costs constant memory (the JSON body limit does not apply to it). Other
 * parts are drained. A body that ends before its form does errors the file stream, so `consume`
 * can tell a complete file from a truncated one.
 */
export function withMultipartFile<T>(req: Request, field: string, consume: (file: Readable) => Promise<T>): Promise<T> {
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: { "content-type": req.headers.get("content-type") ?? "" } });
  } catch {
    return Promise.reject(notMultipart());
  }
  if (!req.body) return Promise.reject(notMultipart());
  const body = Readable.fromWeb(req.body as import("node:stream/web").ReadableStream);
  return new Promise<T>((resolve, reject) => {
    let consumed: Promise<T> | null = null;
    let current: Readable | null = null;
    parser.on("file", (name, stream) => {
      if (name !== field || consumed) return void stream.resume();
      current = stream;
      consumed = consume(stream);
      consumed.catch(() => {
        // Settled through `close` or `error` below (which pass the rejection on); this only keeps an
        // early rejection from counting as unhandled meanwhile.
      });
    });
    parser.on("error", (err) => {
      current?.destroy(err as Error);
      body.destroy();
      if (consumed) consumed.then(() => reject(notMultipart()), reject);
      else reject(notMultipart());
    });
    parser.on("close", () => {
      if (consumed) consumed.then(resolve, reject);
      else reject(new ValidationFailed([{ loc: ["body", "file"], msg: "Field required", type: "missing" }]));
    });
    body.on("error", (err) => parser.destroy(err));
    body.pipe(parser);
  });
}
