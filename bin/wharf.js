#!/usr/bin/env node
// The published entry point: TypeScript runs through tsx so that user graph files and our own
// sources load without a build step (the agent server must import `.ts` graphs at run time anyway).
import { superviseEarly } from "./platform-child.js";

// A supervised `wharf up` forks the platform before anything else loads here.
const early = superviseEarly(process.argv);

// Loaded before the TypeScript loader hooks are in place, where they load several times faster (the
// hooks cost about a millisecond per module); `wharf up` binds its port right after them.
const [{ register }] = await Promise.all([import("tsx/esm/api"), import("zod"), import("commander")]);
register();
if (early) {
  const { supervise } = await import("../src/platform/supervisor.ts");
  supervise(early);
} else {
  const { main } = await import("../src/cli/main.ts");
  await main(process.argv);
}
