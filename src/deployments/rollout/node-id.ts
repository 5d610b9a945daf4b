import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { DeploymentsLayout } from "../layout.ts";

/**
 * This platform's identity as an owner of rollouts and servers: stable across restarts of the same
 * `$WHARF_HOME` (so a restart recognises its own leftovers at once) and unique across homes.
 */
export function readNodeId(layout: DeploymentsLayout): string {
  const file = path.join(layout.root, "node-id");
  try {
    const id = fs.readFileSync(file, "utf8").trim();
    if (id) return id;
  } catch {
    /* first start */
  }
  fs.mkdirSync(layout.root, { recursive: true, mode: 0o700 });
  const id = `node-${crypto.randomBytes(6).toString("hex")}`;
  fs.writeFileSync(file, id + "\n", { mode: 0o600 });
  return id;
}
