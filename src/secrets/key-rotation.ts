import type { Kysely } from "kysely";
import { addActiveKey, loadKeyring, reloadKeyring, retainOnlyKeys } from "../crypto/keyring.ts";
import { SecretBox } from "../crypto/secret-box.ts";
import type { Database } from "../store/schema.ts";
import { resealAll, scanKeyUsage, type KeyUse, type UnreadableRow } from "./rotate-master-key.ts";

export interface RotationOptions {
  home: string;
  /** `WHARF_MASTER_KEY`: keys come from the environment, so none is generated or dropped here. */
  masterKey: string | null;
  keepOld?: boolean;
  /** Passes over the data before giving up on keys a concurrent writer keeps using. */
  passes?: number;
  say?: (line: string) => void;
}

export interface RotationResult {
  activeKeyId: string;
  resealed: number;
  dropped: string[];
  /** Old keys still used by some row after every pass, with the rows (a sample per location). */
  kept: Map<string, KeyUse[]>;
  unreadable: UnreadableRow[];
}

/** Which keys may go: those no row uses, never the active one. A pure decision. */
export function keysToDrop(known: Iterable<string>, activeId: string, inUse: ReadonlySet<string>): string[] {
  return [...known].filter((id) => id !== activeId && !inUse.has(id));
}

/**
 * Makes a new master key active (unless keys come from the environment) and re-encrypts every
 * sealed value of every feature under it, in batches, while servers keep running: a server seals
 * under the new key from its next write (it re-reads the key file when it changes), and rows it
 * wrote under the old key meanwhile are caught by the next pass. An old key is dropped from the key
 * file only after a scan of every row shows no value under it; otherwise it stays and the rows
 * holding it are named.
 */
export async function rotateMasterKey(db: Kysely<Database>, options: RotationOptions): Promise<RotationResult> {
  const say = options.say ?? ((): void => undefined);
  const fromEnv = options.masterKey !== null;
  if (!fromEnv) {
    loadKeyring(options.home, null);
    say(`new active master key ${addActiveKey(options.home).activeId}`);
    // A write sealed under the old key just before the file changed lands within this settle time.
    await new Promise((r) => setTimeout(r, 250));
  }
  const box = new SecretBox(loadKeyring(options.home, options.masterKey), () =>
    reloadKeyring(options.home, options.masterKey),
  );
  let resealed = 0;
  let unreadable: UnreadableRow[] = [];
  let usage = new Map<string, KeyUse[]>();
  const passes = options.passes ?? 3;
  for (let pass = 1; pass <= passes; pass++) {
    const r = await resealAll(db, box);
    resealed += r.resealed;
    unreadable = r.unreadable;
    usage = await scanKeyUsage(db);
    usage.delete(box.activeKeyId);
    if (usage.size === 0 || unreadable.length > 0) break;
    // A server that sealed under the old key between our read and its reload: try again shortly.
    if (pass < passes) await new Promise((r) => setTimeout(r, 300 * pass));
  }
  say(`re-encrypted ${resealed} value(s) under ${box.activeKeyId}`);
  for (const u of unreadable) say(`cannot re-encrypt ${u.location} (${u.row}): ${u.reason}`);
  for (const [keyId, rows] of usage) {
    say(`key ${keyId} is still used by: ${rows.map((r) => `${r.location} (${r.row})`).join("; ")}`);
  }
  let dropped: string[] = [];
  if (!fromEnv && !options.keepOld) {
    const known = loadKeyring(options.home, null).keys.keys();
    dropped = keysToDrop(known, box.activeKeyId, new Set(usage.keys()));
    retainOnlyKeys(options.home, new Set([box.activeKeyId, ...usage.keys()]));
    if (dropped.length) say(`dropped unused key(s) ${dropped.join(", ")}`);
  } else if (fromEnv) {
    say(
      usage.size
        ? "keep the old keys in WHARF_MASTER_KEY until the rows above are re-encrypted"
        : "no row uses an older key: WHARF_MASTER_KEY may now list the active key alone",
    );
  }
  return { activeKeyId: box.activeKeyId, resealed, dropped, kept: usage, unreadable };
}
