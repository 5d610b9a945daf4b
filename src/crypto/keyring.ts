import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/**
 * The master keys that encrypt secrets at rest. One key is active (new data is sealed under it);
 * older ones stay so that rows sealed before a rotation still open until they are re-encrypted.
 */
export interface Keyring {
  activeId: string;
  keys: Map<string, Buffer>;
}

interface KeyringFile {
  active: string;
  keys: Record<string, string>;
}

export class KeyringError extends Error {}

const KEY_BYTES = 32;

function decodeKey(text: string, origin: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-f]{64}$/i.test(trimmed) ? Buffer.from(trimmed, "hex") : Buffer.from(trimmed, "base64");
  if (key.length !== KEY_BYTES) {
    throw new KeyringError(`${origin}: a master key must be 32 bytes, base64 or hex encoded (got ${key.length} bytes)`);
  }
  return key;
}

/** A key's id is derived from the key itself so that the same env value always names the same key. */
export function keyIdOf(key: Buffer): string {
  return "k" + crypto.createHash("sha256").update("wharf-key-id").update(key).digest("hex").slice(0, 12);
}

/** `WHARF_MASTER_KEY`: one key, or several comma-separated with the active one first. */
export function keyringFromEnv(value: string): Keyring {
  const keys = new Map<string, Buffer>();
  const parts = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new KeyringError("WHARF_MASTER_KEY is empty");
  for (const part of parts) {
    const key = decodeKey(part, "WHARF_MASTER_KEY");
    keys.set(keyIdOf(key), key);
  }
  return { activeId: keyIdOf(decodeKey(parts[0], "WHARF_MASTER_KEY")), keys };
}

export function keyringPath(home: string): string {
  return path.join(home, "master.key");
}

function readKeyringFile(file: string): Keyring {
  let parsed: KeyringFile;
  try {
    parsed = JSON.parse(fs.readFileSync(file, "utf8")) as KeyringFile;
  } catch (err) {
    throw new KeyringError(`cannot read master key file ${file}: ${(err as Error).message}`, { cause: err });
  }
  const keys = new Map<string, Buffer>();
  for (const [id, text] of Object.entries(parsed.keys ?? {})) keys.set(id, decodeKey(text, file));
  if (!keys.has(parsed.active)) throw new KeyringError(`${file}: the active key ${parsed.active} is not in the file`);
  return { activeId: parsed.active, keys };
}

function writeKeyringFile(file: string, ring: Keyring): void {
  const body: KeyringFile = {
    active: ring.activeId,
    keys: Object.fromEntries([...ring.keys].map(([id, key]) => [id, key.toString("base64")])),
  };
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(body, null, 2) + "\n", { mode: 0o600 });
  fs.renameSync(tmp, file);
}

/** The keyring from the environment, else from `$WHARF_HOME/master.key`, generated on first start. */
export function loadKeyring(home: string, envValue: string | null): Keyring {
  if (envValue) return keyringFromEnv(envValue);
  const file = keyringPath(home);
  if (!fs.existsSync(file)) {
    const key = crypto.randomBytes(KEY_BYTES);
    writeKeyringFile(file, { activeId: keyIdOf(key), keys: new Map([[keyIdOf(key), key]]) });
  }
  return readKeyringFile(file);
}

const lastRead = new Map<string, { signature: string; ring: Keyring }>();

/**
 * Re-reads the key file if it changed (another process, `wharf secrets rotate-key`, may have added
 * a key): the same object comes back while the file's inode, size and mtime stay the same, so
 * calling this before every seal costs one `stat`.
 */
export function reloadKeyring(home: string, envValue: string | null): Keyring | null {
  if (envValue) return null;
  const file = keyringPath(home);
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  const signature = `${st.ino}:${st.size}:${st.mtimeMs}`;
  const cached = lastRead.get(file);
  if (cached?.signature === signature) return cached.ring;
  const ring = readKeyringFile(file);
  lastRead.set(file, { signature, ring });
  return ring;
}

/** Adds a fresh key to the file and makes it active; old keys stay for reading. */
export function addActiveKey(home: string): Keyring {
  const file = keyringPath(home);
  const ring = readKeyringFile(file);
  const key = crypto.randomBytes(KEY_BYTES);
  ring.keys.set(keyIdOf(key), key);
  ring.activeId = keyIdOf(key);
  writeKeyringFile(file, ring);
  return ring;
}

/** Drops keys no row uses any more, after a rotation has re-encrypted everything. */
export function retainOnlyKeys(home: string, keep: Set<string>): void {
  const file = keyringPath(home);
  const ring = readKeyringFile(file);
  for (const id of [...ring.keys.keys()]) if (!keep.has(id) && id !== ring.activeId) ring.keys.delete(id);
  writeKeyringFile(file, ring);
}
