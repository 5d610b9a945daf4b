#!/usr/bin/env node
// The published entry point: TypeScript runs through tsx so that user graph files and our own
// sources load without a build step (the agent server must import `.ts` graphs at run time anyway).
import { register } from "tsx/esm/api";

// Loaded before the TypeScript loader hooks are in place, where they load several times faster (the
// hooks cost about a millisecond per module); `wharf up` binds its port right after them.
await Promise.all([import("zod"), import("commander")]);
register();
const { main } = await import("../src/cli/main.ts");
await main(process.argv);
