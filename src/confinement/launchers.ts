/**
 * The two small programs that start sandbox processes (perl/holder.pl, perl/enter.pl), in Perl
 * because perl-base is part of every Debian system, starts in about a millisecond, and can make raw
 * system calls: each replaces a chain of 4-6 processes (sh, unshare, ip, mount, setpriv / sh,
 * nsenter) with one. Syscall numbers come from the platform (per architecture) as the first
 * argument, `name=number,...`.
 */

import type { ChildProcess } from "node:child_process";
import type net from "node:net";
import { perlArgs } from "./perl-programs.ts";

/**
 * HOLDER: a sandbox's first process, run as root (perl/holder.pl says what it does).
 *   perl HOLDER... SYS CGFILES(:) CAPTURE DNS IMAGE|- DISKMNT LOWER UPPER WORK MNT BPF HOSTUID -- bwrap args...
 */
export const holderArgs = (): string[] => perlArgs("holder");

/**
 * Lets a parked HOLDER go on: the word on its fd 5. A holder that dies first (a stop while it
 * starts, its own failure) closes its end with the word unread, and ours then reads ECONNRESET:
 * without a listener that is an uncaught exception in the platform. Its exit says what happened.
 */
export function releaseHolder(child: ChildProcess): void {
  const gate = (child.stdio as unknown as net.Socket[])[5];
  gate.on("error", () => {
    // The holder is gone before it read the word; whoever waits for it sees its exit.
  });
  gate.end("go\n");
}

/** The launcher's fd from which ENTER reads the command's environment. */
export const ENTER_ENV_FD = 4;

/** What ENTER reads from ENTER_ENV_FD: each `NAME=VALUE` hex-encoded (no separator a value could forge), one a line. */
export function enterEnvironment(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([k, v]) => `${Buffer.from(`${k}=${v}`, "utf8").toString("hex")}\n`)
    .join("");
}

/**
 * ENTER: runs one command in a running sandbox, as root until it drops to `uid` (perl/enter.pl
 * says how). The environment arrives on ENTER_ENV_FD, never as arguments.
 *   perl ENTER... SYS ENVFD UID PID START CGFILES(:) SECCOMPHEX|- FSIZE CWD PTY -- argv...
 */
export const enterArgs = (): string[] => perlArgs("enter");
