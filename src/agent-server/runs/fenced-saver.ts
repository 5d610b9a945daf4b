import { checkpointOwner, LeaseLostError, type CheckpointOwner } from "../storage/checkpoint-fence.ts";

/**
 * The checkpointer as a run on a replica writes through it: `put` and `putWrites` are refused once
 * `held()` says the run's lease may be lost (another replica may have taken the run over meanwhile),
 * and run as `owner`'s, so that on PostgreSQL each write's transaction first takes the run's row,
 * still this worker's (storage/checkpoint-fence.ts). A write that finds the run taken over calls
 * `onLost` (the run stops as fenced) and fails.
 */
export function fencedSaver<S extends object>(
  saver: S,
  held: () => boolean,
  owner: CheckpointOwner,
  onLost: () => void,
): S {
  return new Proxy(saver, {
    get: (target, prop, receiver) => {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      if (prop !== "put" && prop !== "putWrites") return value.bind(target);
      return (...args: unknown[]) => {
        if (!held())
          return Promise.reject(new Error("this replica's lease on the run may have expired: checkpoint not written"));
        return checkpointOwner
          .run(owner, () => value.apply(target, args) as Promise<unknown>)
          .catch((err: unknown) => {
            if (err instanceof LeaseLostError) onLost();
            throw err;
          });
      };
    },
  });
}
