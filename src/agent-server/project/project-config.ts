/** `langgraph.json` as this server reads it, and the keys it ignores. */
import { z } from "zod";

const graphSpec = z.union([
  z.string().min(1),
  z.object({ path: z.string().min(1), description: z.string().optional() }).passthrough(),
]);

export const configSchema = z
  .object({
    graphs: z
      .record(z.string().min(1), graphSpec)
      .refine((g) => Object.keys(g).length > 0, "at least one graph is required"),
    env: z.union([z.string(), z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]))]).optional(),
    dependencies: z.array(z.string()).optional(),
    python_version: z
      .union([z.string().regex(/^3\.\d+$/, 'a "major.minor" version such as "3.11"'), z.number()])
      .optional(),
    auth: z
      .object({
        path: z.string().min(1).optional(),
        disable_studio_auth: z.boolean().optional(),
        cache: z
          .object({
            cache_keys: z.array(z.string().min(1)).min(1),
            ttl_seconds: z.number().positive().optional(),
            max_size: z.number().int().positive().optional(),
          })
          .passthrough()
          .optional(),
      })
      .passthrough()
      .optional(),
    node_version: z.union([z.string(), z.number()]).optional(),
    pip_installer: z.enum(["auto", "uv", "pip"]).optional(),
    pip_config_file: z.string().min(1).optional(),
    source: z
      .object({ kind: z.literal("uv"), root: z.string().min(1).optional(), package: z.string().min(1).optional() })
      .passthrough()
      .optional(),
    http: z
      .object({
        app: z.string().min(1).optional(),
        disable_assistants: z.boolean().optional(),
        disable_threads: z.boolean().optional(),
        disable_runs: z.boolean().optional(),
        disable_store: z.boolean().optional(),
        disable_meta: z.boolean().optional(),
        cors: z
          .object({
            allow_origins: z.array(z.string()).optional(),
            allow_origin_regex: z.string().optional(),
            allow_methods: z.array(z.string()).optional(),
            allow_headers: z.array(z.string()).optional(),
            allow_credentials: z.boolean().optional(),
            expose_headers: z.array(z.string()).optional(),
            max_age: z.number().int().min(0).optional(),
          })
          .passthrough()
          .optional(),
      })
      .passthrough()
      .optional(),
    store: z
      .object({
        index: z
          .object({
            dims: z.number().int().positive(),
            embed: z.string().min(1),
            fields: z.array(z.string()).optional(),
          })
          .passthrough()
          .optional(),
        ttl: z
          .object({
            default_ttl: z.number().positive().nullish(),
            refresh_on_read: z.boolean().optional(),
            sweep_interval_minutes: z.number().positive().nullish(),
          })
          .passthrough()
          .optional(),
      })
      .passthrough()
      .optional(),
    ui: z.record(z.string().min(1), z.string().min(1)).optional(),
    checkpointer: z
      .object({
        ttl: z
          .object({
            strategy: z.enum(["delete", "keep_latest"]).optional(),
            default_ttl: z.number().positive(),
            sweep_interval_minutes: z.number().positive().nullish(),
          })
          .passthrough()
          .optional(),
        path: z.string().min(1).optional(),
        serde: z
          .object({
            allowed_json_modules: z.union([z.array(z.array(z.string())), z.boolean()]).nullish(),
            allowed_msgpack_modules: z.union([z.array(z.array(z.string())), z.boolean()]).nullish(),
            pickle_fallback: z.boolean().optional(),
          })
          .passthrough()
          .optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();

/** Keys the LangGraph CLI reads to build a container image: meaningless to this server, noted once. */
const IMAGE_KEYS = new Set([
  "dockerfile_lines",
  "image_distro",
  "base_image",
  "keep_pkg_tools",
  "_INTERNAL_docker_tag",
  "api_version",
]);
const KNOWN_KEYS = new Set([
  "$schema",
  "python_version",
  "pip_installer",
  "pip_config_file",
  "source",
  "graphs",
  "env",
  "dependencies",
  "auth",
  "node_version",
  "http",
  "store",
  "checkpointer",
  "ui",
]);
const KNOWN_HTTP = new Set([
  "app",
  "disable_assistants",
  "disable_threads",
  "disable_runs",
  "disable_store",
  "disable_meta",
  "cors",
]);

/** Every key of `langgraph.json` this server ignores, named, with why (pure: table-tested). */
export function ignoredKeys(raw: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const k of Object.keys(raw)) {
    if (KNOWN_KEYS.has(k)) continue;
    if (IMAGE_KEYS.has(k)) out.push(`"${k}" is for container image builds and is not used by this server`);
    else if (k === "ui_config")
      out.push(`"ui_config" (shared UI dependencies) is not used by this server; each UI bundles its own`);
    else out.push(`unknown key "${k}" is ignored`);
  }
  const http = raw.http && typeof raw.http === "object" ? (raw.http as Record<string, unknown>) : {};
  for (const k of Object.keys(http))
    if (!KNOWN_HTTP.has(k)) out.push(`"http.${k}" is not supported by this server and is ignored`);
  for (const section of ["store", "checkpointer", "auth"] as const) {
    const v = raw[section];
    if (!v || typeof v !== "object") continue;
    const known =
      section === "store"
        ? ["index", "ttl"]
        : section === "checkpointer"
          ? ["ttl", "path", "serde"]
          : ["path", "disable_studio_auth", "cache"];
    for (const k of Object.keys(v))
      if (!known.includes(k)) out.push(`"${section}.${k}" is not supported by this server and is ignored`);
  }
  return out;
}

export type ProjectConfig = z.infer<typeof configSchema>;
