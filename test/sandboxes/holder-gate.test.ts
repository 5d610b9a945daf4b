import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { releaseHolder } from "../../src/confinement/launchers.ts";

test("a holder that dies before it reads its gate word costs the platform no uncaught error", async () => {
  const uncaught: Error[] = [];
  const record = (err: Error) => uncaught.push(err);
  process.on("uncaughtException", record);
  try {
    // The holder's descriptors as the drivers open them; this one never reads fd 5 and exits.
    const child = spawn("/usr/bin/perl", ["-e", "select(undef, undef, undef, 0.2); exit 3"], {
      stdio: ["ignore", "ignore", "pipe", "ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    releaseHolder(child);
    assert.equal(await exited, 3);
    // The reset arrives on our end of the socket pair once the holder's end closes.
    await new Promise((resolve) => setTimeout(resolve, 300));
  } finally {
    process.off("uncaughtException", record);
  }
  assert.deepEqual(
    uncaught.map((e) => e.message),
    [],
  );
});
