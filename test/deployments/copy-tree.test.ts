import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test, type TestContext } from "node:test";
import { copyTree, CopyRefused, type CopyOptions } from "../../src/deployments/build/copy-tree.ts";

function tree(t: TestContext, files: Record<string, string | { link: string } | "fifo">): { from: string; to: string } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-copy-"));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const from = path.join(root, "from");
  fs.mkdirSync(from);
  for (const [name, v] of Object.entries(files)) {
    const at = path.join(from, name);
    fs.mkdirSync(path.dirname(at), { recursive: true });
    if (v === "fifo") execFileSync("mkfifo", [at]);
    else if (typeof v === "string") fs.writeFileSync(at, v);
    else fs.symlinkSync(v.link.replace("$FROM", from), at);
  }
  return { from, to: path.join(root, "to") };
}

const opts = (over: Partial<CopyOptions> = {}): CopyOptions => ({
  skipNames: new Set(["node_modules"]),
  skipDir: null,
  maxBytes: 1 << 20,
  maxFiles: 100,
  signal: new AbortController().signal,
  log: () => {},
  ...over,
});

test("copyTree: what is copied, skipped or refused", async (t) => {
  const cases: Array<
    [string, Record<string, string | { link: string } | "fifo">, Partial<CopyOptions>, RegExp | null]
  > = [
    ["plain files and folders", { "a.txt": "a", "sub/b.txt": "b", "node_modules/x.js": "x" }, {}, null],
    ["too many files", { a: "1", b: "2", c: "3" }, { maxFiles: 2 }, /more than 2 files/],
    ["too many bytes", { a: "x".repeat(20) }, { maxBytes: 10 }, /larger than the limit/],
    ["absolute link out", { out: { link: "/etc" } }, {}, /leaves the source folder/],
    ["relative link out", { "sub/out": { link: "../../x" } }, {}, /leaves the source folder/],
    [
      "link through a link to the folder itself",
      { here: { link: "." }, "sub/f": "f", out: { link: "here/../etc" } },
      {},
      /leaves the source folder/,
    ],
    ["FIFO skipped", { pipe: "fifo", a: "a" }, {}, null],
    ["climbing link that stays inside", { "a.txt": "a", "sub/up": { link: "../a.txt" } }, {}, null],
    ["dangling link, not climbing", { later: { link: "not-yet-there" } }, {}, null],
    ["dangling link that climbs", { "sub/gone": { link: "../missing/../x" } }, {}, /leaves the source folder/],
  ];
  for (const [name, files, over, refused] of cases) {
    const { from, to } = tree(t, files);
    const run = copyTree(from, to, opts(over));
    if (refused) await assert.rejects(run, (e: Error) => e instanceof CopyRefused && refused.test(e.message), name);
    else await run;
  }
});

test("copyTree: links stay links (absolute ones inside the folder become relative); FIFOs are never opened", async (t) => {
  const { from, to } = tree(t, {
    "sub/f.txt": "f",
    "abs-link": { link: "$FROM/sub/f.txt" },
    "rel-link": { link: "sub/f.txt" },
    pipe: "fifo",
    "node_modules/m": "m",
  });
  const lines: string[] = [];
  const { files } = await copyTree(from, to, opts({ log: (l) => lines.push(l) }));
  assert.equal(files, 1);
  assert.equal(fs.readlinkSync(path.join(to, "abs-link")), "sub/f.txt");
  assert.equal(fs.readlinkSync(path.join(to, "rel-link")), "sub/f.txt");
  assert.equal(fs.readFileSync(path.join(to, "abs-link"), "utf8"), "f");
  assert.equal(fs.existsSync(path.join(to, "pipe")), false);
  assert.equal(fs.existsSync(path.join(to, "node_modules")), false);
  assert.deepEqual(lines, ["skipped pipe (not a regular file)"]);
});
