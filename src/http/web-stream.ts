import type { Readable } from "node:stream";

/**
 * A web stream's controller whose calls are no-ops once the stream is closed, errored or cancelled.
 *
 * A `ReadableStreamDefaultController` throws `ERR_INVALID_STATE` when it is used after the stream
 * ended; its users are event handlers, timers and promise callbacks, outside the stream's own
 * machinery, where that throw is uncaught and takes the whole process down. A client that hangs
 * up cancels the stream at any moment, so every producer of a response body goes through this.
 */
export interface GuardedController<T> {
  /** False once the stream is closed, errored or cancelled: producers stop producing. */
  readonly open: boolean;
  /** Queues a chunk; returns whether the consumer wants more now (backpressure). */
  enqueue(chunk: T): boolean;
  close(): void;
  error(err: unknown): void;
  /** Call from the source's `cancel()`: the consumer is gone. */
  cancelled(): void;
}

export function guardController<T>(controller: ReadableStreamDefaultController<T>): GuardedController<T> {
  let open = true;
  const attempt = (op: () => void) => {
    if (!open) return;
    try {
      op();
    } catch {
      // The stream ended under us by a path this guard did not see: it is over either way.
      open = false;
    }
  };
  return {
    get open() {
      return open;
    },
    enqueue(chunk) {
      attempt(() => controller.enqueue(chunk));
      return open && (controller.desiredSize ?? 1) > 0;
    },
    close() {
      attempt(() => controller.close());
      open = false;
    },
    error(err) {
      attempt(() => controller.error(err));
      open = false;
    },
    cancelled() {
      open = false;
    },
  };
}

/**
 * A web stream over a Node stream, with backpressure. Cancelling (the client went away) calls
 * `onCancel` (to stop what produces the data) and destroys the Node stream; whatever the Node
 * stream emits afterwards ("data", "end", "error") is ignored instead of thrown.
 */
export function webStreamOf(out: Readable, onCancel: () => void): ReadableStream<Uint8Array> {
  let guard: GuardedController<Uint8Array> | null = null;
  const onData = (d: Buffer) => {
    if (!guard?.enqueue(new Uint8Array(d.buffer, d.byteOffset, d.byteLength))) out.pause();
  };
  const onEnd = () => guard?.close();
  // Stays attached for good: an "error" without a listener would itself be thrown.
  const onError = (err: Error) => guard?.error(err);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      guard = guardController(controller);
      out.on("data", onData);
      out.once("end", onEnd);
      out.on("error", onError);
    },
    pull() {
      if (guard?.open) out.resume();
    },
    cancel() {
      guard?.cancelled();
      out.off("data", onData);
      out.off("end", onEnd);
      onCancel();
      out.destroy();
    },
  });
}
