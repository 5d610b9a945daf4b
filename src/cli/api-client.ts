import fs from "node:fs";
import path from "node:path";
import { readSetting } from "../config/index.ts";
import { CliError } from "./errors.ts";
import { bootstrapKeyPath } from "../platform/bootstrap.ts";

export { CliError };

/** Where the CLI finds the server and a key: flags, then WHARF_URL / WHARF_API_KEY, then the bootstrap key file. */
export interface Connection {
  baseUrl: string;
  apiKey: string | null;
  tenantId: string | null;
}

export function connectionFromEnv(opts: { url?: string; apiKey?: string; tenant?: string } = {}): Connection {
  const host = readSetting("WHARF_HOST");
  const port = readSetting("WHARF_PORT");
  const baseUrl = (
    opts.url ||
    readSetting("WHARF_URL") ||
    `http://${host.includes(":") ? `[${host}]` : host}:${port}`
  ).replace(/\/+$/, "");
  let apiKey = opts.apiKey || readSetting("WHARF_API_KEY") || null;
  if (!apiKey) {
    const file = bootstrapKeyPath(path.resolve(readSetting("WHARF_HOME")));
    if (fs.existsSync(file)) apiKey = fs.readFileSync(file, "utf8").trim();
  }
  return { baseUrl, apiKey, tenantId: opts.tenant || readSetting("WHARF_TENANT_ID") || null };
}

/** Calls the control plane and returns parsed JSON; turns error bodies into readable CliErrors. */
export async function callApi<T = unknown>(
  conn: Connection,
  method: string,
  pathname: string,
  body?: unknown,
): Promise<T> {
  if (!conn.apiKey)
    throw new CliError(
      "no API key: set WHARF_API_KEY, pass --api-key, or run from the folder whose .wharf/bootstrap-key `wharf up` wrote",
    );
  const headers: Record<string, string> = { "X-Api-Key": conn.apiKey };
  if (conn.tenantId) headers["X-Tenant-Id"] = conn.tenantId;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(conn.baseUrl + pathname, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new CliError(
      `cannot reach Wharf at ${conn.baseUrl} (${(err as Error).cause ?? (err as Error).message}); is \`wharf up\` running?`,
    );
  }
  const text = await res.text();
  const data = text ? (JSON.parse(text) as unknown) : undefined;
  if (!res.ok) throw new CliError(`${method} ${pathname} failed with ${res.status}: ${describeDetail(data)}`);
  return data as T;
}

function describeDetail(data: unknown): string {
  const detail = (data as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail))
    return detail.map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join(".")}: ${d.msg}`).join("; ");
  return JSON.stringify(data);
}
