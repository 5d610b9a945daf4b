import fs from "node:fs";
import path from "node:path";

/**
 * Debian's alternatives (`awk`, `which`, `pager`, `lzma`, `editor`, …) are symlinks that no
 * package lists: `update-alternatives` creates them from maintainer scripts. A tree assembled
 * from `dpkg -L` file lists lacks them, so they are rebuilt here from dpkg's own database
 * (`/var/lib/dpkg/alternatives/<name>`), choosing for each group the best choice whose file is
 * present in the tree.
 */
export interface AlternativeGroup {
  name: string;
  link: string;
  /** Slave names and their links, in the order of the choice lines. */
  slaves: Array<{ name: string; link: string }>;
  choices: Array<{ path: string; priority: number; slaves: string[] }>;
}

/** Parses one file of `/var/lib/dpkg/alternatives` (the format `update-alternatives` writes). */
export function parseAlternativeGroup(name: string, text: string): AlternativeGroup | null {
  const lines = text.split("\n");
  if (lines.length < 3) return null;
  let i = 1;
  const link = lines[i++];
  if (!link?.startsWith("/")) return null;
  const slaves: AlternativeGroup["slaves"] = [];
  while (i < lines.length && lines[i] !== "") {
    const slaveName = lines[i++];
    const slaveLink = lines[i++] ?? "";
    slaves.push({ name: slaveName, link: slaveLink });
  }
  i++; // the empty line ending the slave list
  const choices: AlternativeGroup["choices"] = [];
  while (i < lines.length && lines[i] !== "") {
    const choicePath = lines[i++];
    const priority = Number(lines[i++]);
    const choiceSlaves = slaves.map(() => lines[i++] ?? "");
    choices.push({ path: choicePath, priority: Number.isFinite(priority) ? priority : 0, slaves: choiceSlaves });
  }
  return { name, link, slaves, choices };
}

/** The choice to use: the host's current one when the tree has it, else the highest priority present. */
export function pickChoice(
  group: AlternativeGroup,
  present: (p: string) => boolean,
  hostCurrent: string | null,
): AlternativeGroup["choices"][number] | null {
  const available = group.choices.filter((c) => present(c.path));
  const current = available.find((c) => c.path === hostCurrent);
  if (current) return current;
  return available.sort((a, b) => b.priority - a.priority)[0] ?? null;
}

/** `path` inside `root`, following the tree's own merged-/usr links (/bin → usr/bin). */
function inTree(root: string, p: string): string {
  const rel = p.replace(/^\/+/, "");
  const [first, ...rest] = rel.split("/");
  if (["bin", "sbin", "lib", "lib64"].includes(first)) return path.join(root, "usr", first, ...rest);
  return path.join(root, rel);
}

function linkInto(root: string, linkPath: string, target: string): void {
  const at = inTree(root, linkPath);
  if (!fs.existsSync(path.dirname(at))) return; // the group's link lives where the tree has nothing
  fs.rmSync(at, { force: true });
  fs.symlinkSync(target, at);
}

/** Recreates every alternatives group whose chosen file the tree holds; returns the names made. */
export function carryAlternatives(
  root: string,
  adminDir = "/var/lib/dpkg/alternatives",
  etcDir = "/etc/alternatives",
): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(adminDir);
  } catch {
    return []; // not a dpkg system: nothing to carry
  }
  const altDir = path.join(root, "etc", "alternatives");
  fs.rmSync(altDir, { recursive: true, force: true });
  fs.mkdirSync(altDir, { recursive: true, mode: 0o755 });
  const present = (p: string) => p !== "" && fs.existsSync(inTree(root, p));
  const made: string[] = [];
  for (const name of names.sort()) {
    const group = parseAlternativeGroup(name, fs.readFileSync(path.join(adminDir, name), "utf8"));
    if (!group) continue;
    let hostCurrent: string | null = null;
    try {
      hostCurrent = fs.readlinkSync(path.join(etcDir, name));
    } catch {
      hostCurrent = null; // the group has no current choice on the host
    }
    const choice = pickChoice(group, present, hostCurrent);
    if (!choice) continue;
    fs.symlinkSync(choice.path, path.join(altDir, name));
    linkInto(root, group.link, `/etc/alternatives/${name}`);
    group.slaves.forEach((slave, k) => {
      const target = choice.slaves[k];
      if (!target || !present(target)) return;
      fs.symlinkSync(target, path.join(altDir, slave.name));
      linkInto(root, slave.link, `/etc/alternatives/${slave.name}`);
    });
    made.push(name);
  }
  return made;
}
