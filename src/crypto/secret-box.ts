import crypto from "node:crypto";
import type { Keyring } from "./keyring.ts";

/** A value sealed at rest: the id of the master key it is under, and iv|tag|ciphertext in base64. */
export interface Sealed {
  keyId: string;
  blob: string;
}

export class SecretBoxError extends Error {}

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * AES-256-GCM under the keyring's active key. The associated data binds a ciphertext to the row it
 * belongs to (workspace, purpose, name), so a sealed value copied into another row does not open.
 *
 * `reload` returns the key file's current keyring (cheap when unchanged: `reloadKeyring` caches by
 * the file's stat). Sealing consults it first, so a running server seals under a key that
 * `wharf secrets rotate-key` made active a moment ago; keys the file dropped stay in memory, so a
 * value read just before a rotation still opens.
 */
export class SecretBox {
  private seen: Keyring | null = null;

  constructor(
    private ring: Keyring,
    private readonly reload: () => Keyring | null = () => null,
  ) {}

  get activeKeyId(): string {
    this.refresh();
    return this.ring.activeId;
  }

  private refresh(): void {
    const fresh = this.reload();
    if (!fresh || fresh === this.seen) return;
    this.seen = fresh;
    const keys = new Map(this.ring.keys);
    for (const [id, key] of fresh.keys) keys.set(id, key);
    this.ring = { activeId: fresh.activeId, keys };
  }

  seal(plaintext: string, associatedData: string): Sealed {
    this.refresh();
    const key = this.ring.keys.get(this.ring.activeId)!;
    const iv = crypto.randomBytes(IV_BYTES);
    const cipher = crypto.createCipheriv("aes-256-gcm", key, iv);
    cipher.setAAD(Buffer.from(associatedData, "utf8"));
    const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return { keyId: this.ring.activeId, blob: Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString("base64") };
  }

  open(sealed: Sealed, associatedData: string): string {
    const key = this.keyFor(sealed.keyId);
    const raw = Buffer.from(sealed.blob, "base64");
    if (raw.length < IV_BYTES + TAG_BYTES) throw new SecretBoxError("sealed value is truncated");
    const decipher = crypto.createDecipheriv("aes-256-gcm", key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(associatedData, "utf8"));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
    } catch {
      throw new SecretBoxError(`sealed value does not open under key ${sealed.keyId} (tampered or wrong row)`);
    }
  }

  private keyFor(keyId: string): Buffer {
    let key = this.ring.keys.get(keyId);
    if (!key) {
      this.refresh();
      key = this.ring.keys.get(keyId);
    }
    if (!key) throw new SecretBoxError(`master key ${keyId} is not in the keyring`);
    return key;
  }

  /** Derives a purpose-bound subkey (for example to sign bearer tokens) from a master key. */
  deriveKey(purpose: string, keyId: string = this.ring.activeId): Buffer {
    return Buffer.from(crypto.hkdfSync("sha256", this.keyFor(keyId), Buffer.alloc(0), `wharf:${purpose}`, 32));
  }
}
