import type { ProcRef } from "../../../confinement/index.ts";
import type { RuntimeRef } from "../driver.ts";

/**
 * The local driver's runtime reference: the holder (its network and mount namespaces) and bubblewrap's
 * pid 1 (the other namespaces), each with its start time so a recycled pid is never taken for them.
 * A type, not an interface: it is then a `RuntimeRef` as it stands.
 */
export type LocalRef = { holder: ProcRef; init: ProcRef };

/**
 * The reference `finish` returned, back from its generic form (the lifecycle stores it as JSON and
 * hands it back, after a restart too): the one place that trusts its shape, which only this driver writes.
 */
export function localRef(ref: RuntimeRef): LocalRef {
  return ref as LocalRef;
}
