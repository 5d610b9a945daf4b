import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import { describe, test } from "node:test";
import {
  addActiveKey,
  keyringFromEnv,
  keyringPath,
  loadKeyring,
  reloadKeyring,
  retainOnlyKeys,
} from "../../src/crypto/keyring.ts";
import { keysToDrop } from "../../src/secrets/key-rotation.ts";
import { SecretBox, SecretBoxError } from "../../src/crypto/secret-box.ts";
import { tempHome } from "../support/dialects.ts";

describe("SecretBox", () => {
  test("seals with AES-256-GCM bound to its row; tampering and row swaps fail", () => {
    const box = new SecretBox(keyringFromEnv(crypto.randomBytes(32).toString("base64")));
    const sealed = box.seal("hunter2", "workspace-secret:w1:A");
    assert.ok(!Buffer.from(sealed.blob, "base64").includes(Buffer.from("hunter2")));
    assert.equal(box.open(sealed, "workspace-secret:w1:A"), "hunter2");
    assert.throws(() => box.open(sealed, "workspace-secret:w2:A"), SecretBoxError);
    const raw = Buffer.from(sealed.blob, "base64");
    raw[raw.length - 1] ^= 1;
    assert.throws(
      () => box.open({ keyId: sealed.keyId, blob: raw.toString("base64") }, "workspace-secret:w1:A"),
      SecretBoxError,
    );
    assert.throws(
      () => box.open({ keyId: "kunknown", blob: sealed.blob }, "workspace-secret:w1:A"),
      /not in the keyring/,
    );
  });

  test("a generated key file is 0600; rotation keeps old keys readable", () => {
    const home = tempHome();
    const ring = loadKeyring(home, null);
    assert.equal(fs.statSync(keyringPath(home)).mode & 0o777, 0o600);
    const box = new SecretBox(ring, () => loadKeyring(home, null));
    const old = box.seal("v", "aad");
    const rotated = addActiveKey(home);
    assert.notEqual(rotated.activeId, ring.activeId);
    const fresh = new SecretBox(loadKeyring(home, null));
    assert.equal(fresh.open(old, "aad"), "v");
    assert.equal(fresh.seal("w", "aad").keyId, rotated.activeId);
    // The running box learns the new key from the file when it meets a value sealed under it.
    assert.equal(box.open(fresh.seal("w", "aad"), "aad"), "w");
  });

  test("a running box seals under a key another process made active, and keeps keys the file dropped", () => {
    const home = tempHome();
    const first = loadKeyring(home, null);
    const box = new SecretBox(first, () => reloadKeyring(home, null));
    const old = box.seal("v", "aad");
    assert.equal(old.keyId, first.activeId);
    const rotated = addActiveKey(home);
    assert.equal(box.seal("w", "aad").keyId, rotated.activeId, "the next seal uses the new active key");
    retainOnlyKeys(home, new Set([rotated.activeId]));
    assert.equal(box.open(old, "aad"), "v", "a value read before the drop still opens");
    assert.equal(reloadKeyring(home, null), reloadKeyring(home, null), "an unchanged file is not re-read");
  });

  test("keysToDrop keeps the active key and every key in use", () => {
    const table: Array<[string[], string, string[], string[]]> = [
      [["a", "b", "c"], "c", [], ["a", "b"]],
      [["a", "b", "c"], "c", ["a"], ["b"]],
      [["a"], "a", ["a"], []],
      [["a", "b"], "b", ["a", "b"], []],
    ];
    for (const [known, active, inUse, want] of table) assert.deepEqual(keysToDrop(known, active, new Set(inUse)), want);
  });

  test("WHARF_MASTER_KEY: base64 or hex, several keys, first active; bad lengths are refused", () => {
    const a = crypto.randomBytes(32),
      b = crypto.randomBytes(32);
    const ring = keyringFromEnv(`${a.toString("base64")},${b.toString("hex")}`);
    assert.equal(ring.keys.size, 2);
    assert.equal(ring.keys.get(ring.activeId)!.equals(a), true);
    assert.throws(() => keyringFromEnv("c2hvcnQ="), /32 bytes/);
  });
});
