import type { Kysely } from "kysely";
import {
  prepareProxyConfig,
  presentProxyConfig,
  releaseEgressValues,
  type StoredProxyConfig,
} from "../../egress/index.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { Database } from "../../store/schema.ts";
import type { CreateDeploymentBody } from "./schemas.ts";

/**
 * A deployment's `proxy_config` through the sandboxes' contract: validated and sealed by the egress
 * area (`prepareProxyConfig`: the same 422 `loc`s under `["body","proxy_config",…]`, workspace
 * secrets must exist, `opaque` values sealed), stored as the column's JSON, presented without any
 * write-only value, and its sealed values released when replaced or deleted.
 */

type Input = CreateDeploymentBody["proxy_config"];

/** The column's text for a request's `proxy_config`: undefined when absent, null when cleared. */
export async function storedProxyConfig(
  ctx: PlatformContext,
  workspaceId: string,
  input: Input | undefined,
): Promise<string | null | undefined> {
  if (input === undefined) return undefined;
  if (input === null) return null;
  return JSON.stringify(await prepareProxyConfig({ db: ctx.db, box: ctx.box }, workspaceId, input));
}

export function parseProxyConfig(text: string | null | undefined): StoredProxyConfig | null {
  return text ? (JSON.parse(text) as StoredProxyConfig) : null;
}

/** The response form: rules as written, `opaque` values as `{"type":"opaque","is_set":true}`. */
export function presentStoredProxyConfig(text: string | null | undefined): Record<string, unknown> | null {
  return presentProxyConfig(parseProxyConfig(text));
}

/** Deletes the sealed values a stored config refers to (it was replaced, or its deployment deleted). */
export async function releaseProxyConfig(
  db: Kysely<Database>,
  workspaceId: string,
  text: string | null | undefined,
): Promise<void> {
  const stored = parseProxyConfig(text);
  if (stored) await releaseEgressValues(db, workspaceId, stored);
}
