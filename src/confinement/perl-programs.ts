import fs from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The root helpers are Perl programs (perl-base is on every Debian system, starts in about a
 * millisecond and can make raw system calls): real files in `perl/`, shipped with the package,
 * checked by `perl -c` in `npm run lint` and by test/confinement/perl.test.ts. A program is its
 * library files then its main file, each passed as its own `-e` (perl joins them; nothing is spliced
 * into code: values arrive as arguments, descriptors or the environment). The texts are read once.
 */

export const PERL_DIR = fileURLToPath(new URL("./perl/", import.meta.url));

export const PERL_PROGRAMS = {
  /** A sandbox's first process (root): namespaces, loopback, overlay, egress listeners, then bwrap. */
  holder: ["listener-handover.pl", "holder.pl"],
  /** A confined service's first process: the holder with service-stage.pl's staging instead of the overlay. */
  "service-holder": ["listener-handover.pl", "service-stage.pl", "holder.pl"],
  /** Runs one command in a running sandbox. */
  enter: ["enter.pl"],
  /** A TCP connection to a port on a sandbox's own loopback. */
  connect: ["join-netns.pl", "connect.pl"],
  /** The egress listeners opened anew in a running sandbox's namespace. */
  capture: ["join-netns.pl", "listener-handover.pl", "capture.pl"],
} as const satisfies Record<string, readonly string[]>;

export type PerlProgram = keyof typeof PERL_PROGRAMS;

/** Every Perl file of the package (lint and tests check each). */
export const PERL_FILES: string[] = [...new Set(Object.values(PERL_PROGRAMS).flat())];

const texts = new Map<string, string>();
function text(file: string): string {
  let t = texts.get(file);
  if (t === undefined) {
    // `#line` keeps perl's messages pointing at the file and line, not at the joined -e text.
    t = `#line 1 "${file}"\n${fs.readFileSync(PERL_DIR + file, "utf8")}`;
    texts.set(file, t);
  }
  return t;
}

/** perl's arguments that run `program` (put the program's own arguments after them). */
export function perlArgs(program: PerlProgram): string[] {
  return PERL_PROGRAMS[program].flatMap((f) => ["-e", text(f)]);
}
