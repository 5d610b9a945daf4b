import type { TestContext } from "node:test";
import pg from "pg";
import { execFile } from "node:child_process";

export const STRICT = process.env.WHARF_STRICT === "1" || process.env.CI === "true";

/**
 * Skips a test whose capability is missing, loudly, on a developer's machine; in strict mode (CI)
 * the missing capability is a failure instead, so CI can never pass by skipping.
 */
export function requireCapability(t: TestContext, available: boolean, reason: string): boolean {
  if (available) return true;
  if (STRICT) throw new Error(`required capability missing in strict mode: ${reason}`);
  console.warn(`\n!!! SKIPPING "${t.name}": ${reason}\n`);
  t.skip(reason);
  return false;
}

export const POSTGRES_URL = process.env.WHARF_TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

let pgReachable: Promise<boolean> | null = null;
export function postgresReachable(): Promise<boolean> {
  pgReachable ??= (async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query("select 1");
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  })();
  return pgReachable;
}

export const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0;

let pythonOk: Promise<boolean> | null = null;
/** Python 3.11+ with the venv module (Python graphs and the Python client tests need it, and PyPI). */
export function pythonAvailable(): Promise<boolean> {
  pythonOk ??= new Promise((resolve) => {
    execFile(
      process.env.WHARF_PYTHON || "python3",
      ["-c", "import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 11) else 1)"],
      (err) => resolve(!err),
    );
  });
  return pythonOk;
}

/** Where tests cache the virtual environments of Python projects (creating one downloads from PyPI). */
export const TEST_PYTHON_ENVS = process.env.WHARF_TEST_PYTHON_ENVS || "/tmp/wharf-test-python-envs";
