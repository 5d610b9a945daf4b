import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/**
 * This replica's id: stable across restarts of the same `$WHARF_HOME` (a restarted replica owns
 * the sandboxes and revisions it ran before) and unique across homes. It is the file the
 * deployments' rollout engine names its leases with, so a revision's `owner` is a replica id.
 */
export function readReplicaId(home: string): string {
  const file = path.join(home, "deployments", "node-id");
  try {
    const id = fs.readFileSync(file, "utf8").trim();
    if (id) return id;
  } catch {
    /* first start: made below */
  }
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const id = `node-${crypto.randomBytes(6).toString("hex")}`;
  fs.writeFileSync(file, id + "\n", { mode: 0o600 });
  return id;
}
