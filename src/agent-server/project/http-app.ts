import { pathToFileURL } from "node:url";
import type { Hono } from "hono";
import type { AgentProject } from "./project.ts";

/** A Hono app as the project exports it (`http.app`); any Hono version works (duck-typed). */
export type UserApp = Pick<Hono, "fetch" | "routes">;

const isHono = (v: unknown): v is UserApp =>
  !!v && typeof v === "object" && typeof (v as UserApp).fetch === "function" && Array.isArray((v as UserApp).routes);

/** Imports `http.app`; a failure names the file and stops the start (the routes are part of the API). */
export async function loadHttpApp(project: AgentProject): Promise<UserApp | null> {
  const ref = project.http.app;
  // A Python app is the Python worker's (`python/python-http.ts`).
  if (!ref || ref.runtime === "python") return null;
  const where = `http.app (${ref.file}:${ref.exportName})`;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(ref.file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`cannot load ${where}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
  const app = mod[ref.exportName];
  if (!isHono(app)) throw new Error(`cannot load ${where}: the export is not a Hono app`);
  return app;
}
