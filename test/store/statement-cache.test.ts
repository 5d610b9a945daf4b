import assert from "node:assert/strict";
import { test } from "node:test";
import SQLite from "better-sqlite3";
import { withStatementCache } from "../../src/store/statement-cache.ts";

function open() {
  const raw = new SQLite(":memory:");
  raw.exec("CREATE TABLE t (a INTEGER)");
  raw.prepare("INSERT INTO t (a) VALUES (1), (2), (3)").run();
  return { raw, db: withStatementCache(raw, 2) };
}

test("the same SQL text gets the same prepared statement", () => {
  const { db } = open();
  const s = db.prepare("SELECT a FROM t");
  assert.equal(db.prepare("SELECT a FROM t"), s);
  assert.deepEqual(s.all([]), [{ a: 1 }, { a: 2 }, { a: 3 }]);
});

test("a statement being iterated is not handed out: the caller gets a fresh one", () => {
  const { db } = open();
  const s = db.prepare("SELECT a FROM t WHERE a > ?");
  const it = s.iterate([0]);
  it.next();
  const other = db.prepare("SELECT a FROM t WHERE a > ?");
  assert.notEqual(other, s);
  assert.deepEqual(other.all([1]), [{ a: 2 }, { a: 3 }]);
  it.return?.();
  assert.equal(db.prepare("SELECT a FROM t WHERE a > ?"), s);
});

test("the least recently used statement is dropped past the bound", () => {
  const { db } = open();
  const a = db.prepare("SELECT 1");
  const b = db.prepare("SELECT 2");
  assert.equal(db.prepare("SELECT 1"), a); // now b is the oldest
  db.prepare("SELECT 3");
  assert.equal(db.prepare("SELECT 1"), a);
  assert.notEqual(db.prepare("SELECT 2"), b);
});

test("a kept statement sees a schema change", () => {
  const { raw, db } = open();
  assert.deepEqual(db.prepare("SELECT * FROM t LIMIT 1").all([]), [{ a: 1 }]);
  raw.exec("ALTER TABLE t ADD COLUMN b INTEGER DEFAULT 7");
  assert.deepEqual(db.prepare("SELECT * FROM t LIMIT 1").all([]), [{ a: 1, b: 7 }]);
});
