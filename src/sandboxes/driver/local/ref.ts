import type { ProcRef } from "../../../confinement/index.ts";

export interface LocalRef {
  holder: ProcRef;
  init: ProcRef;
}
