import fs from "node:fs";
import path from "node:path";
import { SpillBuffer } from "../dataplane/output-buffer.ts";

/**
 * Commands a previous platform process ran over WebSocket, found by their output files under
 * `<stateDir>/commands/<sandbox>/`: a client reconnecting to one gets what it printed up to the
 * restart and is then told it ended. A sandbox's entry goes (files included) when it stops, or at
 * start when the sandbox was not re-adopted.
 */
export class LostCommands {
  private readonly lost = new Map<string, Set<string>>();

  constructor(
    private readonly stateDir: string,
    private readonly maxOutputBytes: number,
  ) {}

  /** Reads what the previous process left (start, before re-adoption). */
  find(): void {
    const root = path.join(this.stateDir, "commands");
    let boxes: string[] = [];
    try {
      boxes = fs.readdirSync(root);
    } catch {
      return; // no command ever kept output here
    }
    for (const box of boxes) {
      const ids = new Set<string>();
      for (const f of fs.readdirSync(path.join(root, box))) {
        const m = /^(.+)\.(stdout|stderr)\.\d+$/.exec(f);
        if (m) ids.add(m[1]);
      }
      this.lost.set(box, ids);
    }
  }

  /** Sandboxes with lost commands. */
  sandboxes(): string[] {
    return [...this.lost.keys()];
  }

  /** Drops a sandbox's lost commands and their files (it stopped, or was not re-adopted). */
  forget(sandboxId: string): void {
    if (this.lost.delete(sandboxId)) fs.rmSync(this.outputDir(sandboxId), { recursive: true, force: true });
  }

  /**
   * A command that was running (or kept for reconnects) when the platform restarted: its output up
   * to then, for a reconnecting client that is then told it ended.
   */
  command(sandboxId: string, commandId: string): { stdout: SpillBuffer; stderr: SpillBuffer } | null {
    if (!this.lost.get(sandboxId)?.has(commandId)) return null;
    const dir = this.outputDir(sandboxId);
    return {
      stdout: SpillBuffer.restore(this.maxOutputBytes, dir, `${commandId}.stdout`),
      stderr: SpillBuffer.restore(this.maxOutputBytes, dir, `${commandId}.stderr`),
    };
  }

  /** Where WebSocket commands' output is kept for reconnects (removed with the command). */
  outputDir(sandboxId: string): string {
    return path.join(this.stateDir, "commands", sandboxId);
  }
}
