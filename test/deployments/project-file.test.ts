import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { ProjectFileError, readProjectFile } from "../../src/deployments/build/project-file.ts";

test("project files are read on the host only when they are small regular files below no link", (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-project-file-"));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const host = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-host-"));
  t.after(() => fs.rmSync(host, { recursive: true, force: true }));
  fs.writeFileSync(path.join(host, "secret"), "host secret");
  fs.writeFileSync(path.join(root, "package.json"), "{}");
  fs.mkdirSync(path.join(root, "sub"));
  fs.writeFileSync(path.join(root, "sub", ".npmrc"), "registry=https://r.example/");
  fs.writeFileSync(path.join(root, "big"), Buffer.alloc(2000));
  execFileSync("mkfifo", [path.join(root, "fifo")]);
  fs.symlinkSync("/dev/zero", path.join(root, "zero"));
  fs.symlinkSync(path.join(host, "secret"), path.join(root, "hostfile"));
  fs.symlinkSync("package.json", path.join(root, "inner-link"));
  fs.symlinkSync(host, path.join(root, "linked-dir"));
  fs.mkdirSync(path.join(root, "folder"));

  const cases: Array<[string, string | null | RegExp, number?]> = [
    ["package.json", "{}"],
    ["sub/.npmrc", "registry=https://r.example/"],
    ["missing.json", null],
    ["nowhere/missing.json", null],
    ["package.json/below-a-file", null],
    ["fifo", /fifo is not a regular file \(a FIFO\)/],
    ["zero", /zero is a symbolic link/],
    ["hostfile", /hostfile is a symbolic link/],
    ["inner-link", /inner-link is a symbolic link/],
    ["linked-dir/secret", /below a symbolic link \(linked-dir\)/],
    ["folder", /not a regular file \(a folder\)/],
    ["big", /larger than 1000 bytes/, 1000],
    ["big", "\0".repeat(2000), 2000],
    ["../outside", /outside the project/],
  ];
  for (const [rel, want, max] of cases) {
    const started = performance.now();
    if (want instanceof RegExp)
      assert.throws(
        () => readProjectFile(root, rel, max),
        (err: Error) => err instanceof ProjectFileError && want.test(err.message),
        rel,
      );
    else assert.equal(readProjectFile(root, rel, max), want, rel);
    assert.ok(performance.now() - started < 500, `${rel} took too long`);
  }
});
