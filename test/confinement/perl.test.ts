import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { describe, test } from "node:test";
import {
  PERL_DIR,
  PERL_FILES,
  PERL_PROGRAMS,
  perlArgs,
  type PerlProgram,
} from "../../src/confinement/perl-programs.ts";
import { archSyscalls } from "../../src/confinement/seccomp.ts";
import { startTime } from "../../src/confinement/proc.ts";

// The root helpers' Perl, checked without root: syntax of every file and every composed program,
// and the decisions they make before they need privileges (refusing a recycled pid or a target
// that is not a sandbox) plus the listener handover's framing, which needs no namespace.

const sys = archSyscalls();
const sysArg = sys
  ? Object.entries(sys)
      .map(([k, v]) => `${k}=${v}`)
      .join(",")
  : "";

/** Runs perl with `args`, optionally writing `fd4` to its descriptor 4; resolves with its exit and stderr. */
function perl(args: string[], fd4?: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/perl", args, { stdio: ["ignore", "ignore", "pipe", "ignore", "pipe"], env: {} });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const envPipe = child.stdio[4] as net.Socket;
    envPipe.on("error", () => {
      // The helper may exit before reading its environment: its exit says why.
    });
    envPipe.end(fd4 ?? "");
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
  });
}

/** A process of our own to aim the helpers at, with its start time; killed by `t.after`. */
function target(t: { after(fn: () => void): void }): { pid: number; start: number } {
  const child = spawn("sleep", ["30"], { stdio: "ignore" });
  t.after(() => child.kill("SIGKILL"));
  const start = startTime(child.pid!);
  assert.ok(start !== null);
  return { pid: child.pid!, start };
}

describe("confinement Perl programs", () => {
  test("every file compiles on its own (perl -c)", () => {
    assert.deepEqual([...PERL_FILES].sort(), [
      "capture.pl",
      "connect.pl",
      "enter.pl",
      "holder.pl",
      "join-netns.pl",
      "listener-handover.pl",
      "service-stage.pl",
    ]);
    for (const f of PERL_FILES)
      execFileSync("/usr/bin/perl", ["-c", path.join(PERL_DIR, f)], { stdio: ["ignore", "ignore", "pipe"] });
  });

  test("every program compiles as it is run: its libraries, then its main file", () => {
    for (const p of Object.keys(PERL_PROGRAMS) as PerlProgram[]) {
      const out = execFileSync("/usr/bin/perl", ["-c", ...perlArgs(p)], { stdio: ["ignore", "ignore", "pipe"] });
      assert.equal(out, null);
    }
  });

  test("only the service holder stages binds instead of mounting the sandbox overlay", () => {
    const probe = ["-e", "print defined(&WharfStage::stage_binds) ? 'stage' : 'overlay'; exit 0;"];
    const which = (p: PerlProgram) =>
      execFileSync("/usr/bin/perl", [...perlArgs(p).slice(0, -2), ...probe], { encoding: "utf8" });
    assert.equal(which("holder"), "overlay");
    assert.equal(which("service-holder"), "stage");
  });

  test("enter refuses a pid whose start time is not the sandbox's (a recycled pid)", async (t) => {
    const { pid, start } = target(t);
    const r = await perl([
      ...perlArgs("enter"),
      sysArg,
      "4",
      "1000",
      String(pid),
      String(start + 1),
      "",
      "-",
      "0",
      "/",
      "-",
      "--",
      "/bin/true",
    ]);
    assert.equal(r.code, 125, r.stderr);
    assert.match(r.stderr, /^wharf: sandbox is not running\n$/);
  });

  test("enter refuses a target in the host's user namespace (not a sandbox)", async (t) => {
    const { pid, start } = target(t);
    const r = await perl([
      ...perlArgs("enter"),
      sysArg,
      "4",
      "1000",
      String(pid),
      String(start),
      "",
      "-",
      "0",
      "/",
      "-",
      "--",
      "/bin/true",
    ]);
    assert.equal(r.code, 125, r.stderr);
    assert.match(r.stderr, /^wharf: target is not a sandbox\n$/);
  });

  test("connect refuses a pid whose start time is not the sandbox's", async (t) => {
    const { pid, start } = target(t);
    const r = await perl([...perlArgs("connect"), sysArg, String(pid), String(start + 1), "80"]);
    assert.equal(r.code, 120, r.stderr);
    assert.match(r.stderr, /^sandbox is not running/);
  });

  test("the listener handover passes a listening socket over Node's IPC channel", async (t) => {
    // The handover's library with a small main of the test's own: port 0 binds an ephemeral port.
    const main = `sub fail { print STDERR "$_[0]: $!\\n"; exit 120 }
my %S = map { split /=/ } split /,/, shift @ARGV;
my $fdn = $ENV{NODE_CHANNEL_FD} + 0;
open(my $ch, "+<&=", $fdn) or fail("ipc channel");
WharfHandover::hand_over(\\%S, $fdn, $ch, [0], "nodns", sub { close($_[0]) });`;
    const child = spawn("/usr/bin/perl", [...perlArgs("capture").slice(2, 4), "-e", main, sysArg], {
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      env: {},
    });
    t.after(() => child.kill("SIGKILL"));
    const got: Array<{ kind: string; server?: net.Server }> = [];
    const done = new Promise<void>((resolve, reject) => {
      child.on("message", (msg: { kind: string }, handle: unknown) => {
        got.push({ kind: msg.kind, server: handle as net.Server | undefined });
        if (msg.kind === "done") resolve();
      });
      child.on("close", (code) => reject(new Error(`handover exited with ${code}`)));
    });
    await done;
    assert.deepEqual(
      got.map((g) => g.kind),
      ["tcp", "done"],
    );
    const server = got[0].server!;
    t.after(() => server.close());
    const port = (server.address() as net.AddressInfo).port;
    assert.ok(port > 0);
    // The socket is listening: a connection is accepted by the platform's copy.
    const accepted = new Promise<void>((resolve) => server.once("connection", (s) => (s.destroy(), resolve())));
    const c = net.connect(port, "127.0.0.1");
    c.on("error", () => {
      // Closed by the server's side once accepted.
    });
    await accepted;
    c.destroy();
  });
});
