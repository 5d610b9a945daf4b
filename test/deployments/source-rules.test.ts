import assert from "node:assert/strict";
import { test } from "node:test";
import {
  isWithin,
  LOCAL_PATH_OFF,
  LOCAL_PATH_OUTSIDE,
  localPathProblem,
} from "../../src/deployments/build/local-roots.ts";
import { REPO_URL_RULE, repoUrlProblem } from "../../src/deployments/build/repo-url.ts";

test("isWithin: the folder itself and what is below it, never a sibling with the same prefix", () => {
  const cases: Array<[string, string, boolean]> = [
    ["/srv/a", "/srv/a", true],
    ["/srv/a/b", "/srv/a", true],
    ["/srv/ab", "/srv/a", false],
    ["/srv", "/srv/a", false],
    ["/etc", "/", true],
    ["/srv/a/..b", "/srv/a", true],
  ];
  for (const [child, parent, want] of cases) assert.equal(isWithin(child, parent), want, `${child} in ${parent}`);
});

test("localPathProblem: off without roots; written and resolved path under a root; never /proc, /sys, /dev or the home", () => {
  const roots = ["/srv/projects"];
  const base = { roots, realRoots: ["/srv/projects"], realHome: "/var/lib/wharf" };
  const cases: Array<[string, Partial<Parameters<typeof localPathProblem>[0]>, string | null]> = [
    ["no roots", { written: "/srv/projects/a", real: "/srv/projects/a", roots: [], realRoots: [] }, LOCAL_PATH_OFF],
    ["no roots, host folder", { written: "/etc", real: "/etc", roots: [], realRoots: [] }, LOCAL_PATH_OFF],
    ["under a root", { written: "/srv/projects/a", real: "/srv/projects/a" }, null],
    ["relative", { written: "projects/a", real: "/srv/projects/a" }, LOCAL_PATH_OUTSIDE],
    ["outside", { written: "/etc", real: "/etc" }, LOCAL_PATH_OUTSIDE],
    ["dot-dot out", { written: "/srv/projects/../../etc", real: "/etc" }, LOCAL_PATH_OUTSIDE],
    ["/proc alias", { written: "/proc/self/root/srv/projects/a", real: "/srv/projects/a" }, LOCAL_PATH_OUTSIDE],
    ["link out", { written: "/srv/projects/etc-link", real: "/etc" }, LOCAL_PATH_OUTSIDE],
    ["absent", { written: "/srv/projects/absent", real: null }, LOCAL_PATH_OUTSIDE],
    [
      "home under a root",
      { written: "/srv/projects/h", real: "/srv/projects/h", realHome: "/srv/projects/h" },
      LOCAL_PATH_OUTSIDE,
    ],
    [
      "root is /",
      { written: "/proc/1/root", real: "/proc/1/root", roots: ["/"], realRoots: ["/"] },
      LOCAL_PATH_OUTSIDE,
    ],
    [
      "root is /, devices",
      { written: "/dev/zero", real: "/dev/zero", roots: ["/"], realRoots: ["/"] },
      LOCAL_PATH_OUTSIDE,
    ],
  ];
  for (const [name, c, want] of cases)
    assert.equal(localPathProblem({ ...base, written: "", real: null, ...c }), want, name);
});

test("repoUrlProblem: https and http URLs only", () => {
  const cases: Array<[string, boolean]> = [
    ["https://github.com/org/agent.git", true],
    ["http://git.internal.example/agent.git", true],
    ["https://token@github.com/org/agent.git", true],
    ["file:///srv/repo.git", false],
    ["/srv/repo.git", false],
    ["../repo", false],
    ["ssh://git@github.com/org/agent.git", false],
    ["git@github.com:org/agent.git", false],
    ["git://github.com/org/agent.git", false],
    ["ext::sh -c id", false],
    ["-uhttps://x", false],
    [" https://github.com/x", false],
    ["https://", false],
  ];
  for (const [url, ok] of cases) assert.equal(repoUrlProblem(url), ok ? null : REPO_URL_RULE, url);
});
