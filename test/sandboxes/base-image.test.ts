import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseAlternativeGroup, pickChoice } from "../../src/confinement/alternatives.ts";
import { startSandboxPlatform } from "./support.ts";

const AWK = `auto
/usr/bin/awk
awk.1.gz
/usr/share/man/man1/awk.1.gz
nawk
/usr/bin/nawk

/usr/bin/gawk
10
/usr/share/man/man1/gawk.1.gz
/usr/bin/gawk
/usr/bin/mawk
5
/usr/share/man/man1/mawk.1.gz
/usr/bin/mawk

`;

describe("sandbox base image", () => {
  test("alternatives groups parse and pick a choice the tree has", () => {
    const g = parseAlternativeGroup("awk", AWK)!;
    assert.equal(g.link, "/usr/bin/awk");
    assert.deepEqual(
      g.slaves.map((s) => s.name),
      ["awk.1.gz", "nawk"],
    );
    assert.deepEqual(g.choices[1], {
      path: "/usr/bin/mawk",
      priority: 5,
      slaves: ["/usr/share/man/man1/mawk.1.gz", "/usr/bin/mawk"],
    });
    const cases: Array<[present: string[], host: string | null, want: string | null]> = [
      [["/usr/bin/gawk", "/usr/bin/mawk"], "/usr/bin/mawk", "/usr/bin/mawk"], // the host's choice wins when present
      [["/usr/bin/mawk"], "/usr/bin/gawk", "/usr/bin/mawk"], // else the best one present
      [["/usr/bin/gawk", "/usr/bin/mawk"], null, "/usr/bin/gawk"],
      [[], "/usr/bin/gawk", null],
    ];
    for (const [present, host, want] of cases)
      assert.equal(
        pickChoice(g, (p) => present.includes(p), host)?.path ?? null,
        want,
        JSON.stringify({ present, host }),
      );
    assert.equal(parseAlternativeGroup("x", "auto\n"), null);
  });

  test("the default image is a working Debian userland: alternatives, git, python3 with pip, node, curl, CA certificates", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const box = await p.create({ name: "userland" });
    const script = [
      "set -e",
      // deepagents reads files with awk; `which`, `pager`, `lzma` are alternatives links too.
      "printf 'a\\nb\\n' > f.txt && awk 'NR==2{print \"awk:\" $0}' f.txt",
      "which which python3 git node curl awk pager lzma editor 2>/dev/null | wc -l | sed 's/^/found:/'",
      "echo hi | lzma | lzma -d",
      "git --version | cut -d' ' -f1-2",
      "git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m m && git log --format=%s && cd ..",
      "python3 -c 'import ssl, json, sqlite3, venv; print(\"py ok\")'",
      "python3 -m pip --version | cut -d' ' -f1",
      "python3 -m venv v && v/bin/python -c 'print(\"venv ok\")'",
      "node -e 'console.log(\"node\", typeof fetch)'",
      "curl --version | head -1 | cut -d' ' -f1",
      "test -s /etc/ssl/certs/ca-certificates.crt && echo certs ok",
      "python3 -c 'import socket; print(socket.getservbyname(\"https\"))'",
      "id -un; echo $HOME",
    ].join("\n");
    const r = await p.exec(box, script);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.exit_code, 0, r.body.stderr);
    const out: string = r.body.stdout;
    for (const want of [
      "awk:b",
      "hi",
      "git version",
      "\nm\n",
      "py ok",
      "pip",
      "venv ok",
      "node function",
      "curl",
      "certs ok",
      "443",
      "user\n/home/user",
    ])
      assert.ok(out.includes(want), `missing ${JSON.stringify(want)} in:\n${out}\n${r.body.stderr}`);
    const found = Number(/found:(\d+)/.exec(out)?.[1]);
    assert.ok(found >= 8, `which found only ${found} of the tools:\n${out}`);
  });
});
