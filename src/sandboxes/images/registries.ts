import { z } from "zod";
import type { SecretBox } from "../../crypto/secret-box.ts";
import { conflict, notFound } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import { nameContains } from "../store/sandbox-store.ts";
import type { SandboxRegistriesTable } from "../store/sandbox-tables.ts";

/**
 * `/v2/sandboxes/registries`: credentials for private images (`name`, `url`, `username`,
 * `password`). The password is write-only: sealed with the master key (associated data names the
 * row; listed in the sealed-columns registry so a key rotation re-encrypts it) and never returned.
 */
export type RegistryRow = SandboxRegistriesTable;

const TAGS = ["sandboxes"];
const aad = (workspaceId: string, id: string) => `sandbox-registry:${workspaceId}:${id}`;
const name = z
  .string()
  .regex(
    /^[a-z0-9]([a-z0-9._-]{0,98}[a-z0-9])?$/,
    "Registry names are 1-100 characters: lowercase letters, digits, '.', '_' and '-'",
  );
const url = z
  .string()
  .min(1)
  .max(500)
  .regex(
    /^(https?:\/\/)?[A-Za-z0-9.-]+(:\d{1,5})?(\/[A-Za-z0-9._/-]*)?$/,
    "A registry host (registry.example.com, host:port or https://host)",
  );
const createBody = z.object({
  name,
  url,
  username: z.string().min(1).max(500),
  password: z.string().min(1).max(10_000),
});
const patchBody = createBody.partial();
const listQuery = z.object({
  name_contains: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  offset: z.coerce.number().int().min(0).default(0),
});
const params = z.object({ name: z.string().min(1).max(200) });
const record = z.record(z.string(), z.unknown());

export function presentRegistry(r: RegistryRow): Record<string, unknown> {
  return {
    id: r.id,
    name: r.name,
    url: r.url,
    username: r.username,
    created_at: r.created_at,
    created_by: r.created_by,
    updated_at: r.updated_at,
    updated_by: r.updated_by,
  };
}

/** The registry's password, opened for a pull. */
export function registryPassword(box: SecretBox, r: RegistryRow): string {
  return box.open({ keyId: r.password_key_id, blob: r.password_cipher }, aad(r.workspace_id, r.id));
}

/** The registry host a URL names (`https://host:5000/x` → `host:5000`). */
export function registryHost(u: string): string {
  return u.replace(/^https?:\/\//, "").split("/")[0];
}

function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === "23505" || /UNIQUE constraint failed/i.test(e.message ?? "");
}

export async function findRegistry(
  ctx: PlatformContext,
  workspaceId: string,
  nameOrId: string,
): Promise<RegistryRow | undefined> {
  return ctx.db
    .selectFrom("sandbox_registries")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where((eb) => eb.or([eb("name", "=", nameOrId), eb("id", "=", nameOrId)]))
    .executeTakeFirst();
}

/** `/sandboxes/registries`: image registry credentials, one registrar per operation. */
export function registerRegistryRoutes(router: Router, ctx: PlatformContext): void {
  registerRegistryCreate(router, ctx);
  registerRegistryReads(router, ctx);
  registerRegistryPatch(router, ctx);
  registerRegistryDelete(router, ctx);
}

function registerRegistryCreate(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "post",
    path: "/sandboxes/registries",
    summary: "Add image registry credentials (the password is write-only)",
    tags: TAGS,
    body: createBody,
    responses: { 201: { description: "The registry", schema: record }, 409: { description: "Name in use" } },
    handler: async ({ c, principal, body }) => {
      const id = newId();
      const now = nowIso();
      const sealed = ctx.box.seal(body.password, aad(principal.workspaceId, id));
      const row: RegistryRow = {
        id,
        workspace_id: principal.workspaceId,
        name: body.name,
        url: body.url,
        username: body.username,
        password_key_id: sealed.keyId,
        password_cipher: sealed.blob,
        created_at: now,
        created_by: principal.userId,
        updated_at: now,
        updated_by: principal.userId,
      };
      try {
        await ctx.db.insertInto("sandbox_registries").values(row).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`A registry named ${body.name} already exists`);
        throw err;
      }
      return c.json(presentRegistry(row), 201);
    },
  });
}

function registerRegistryReads(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "get",
    path: "/sandboxes/registries",
    summary: "List image registries",
    tags: TAGS,
    query: listQuery,
    responses: { 200: { description: "Registries and the offset", schema: record } },
    handler: async ({ c, principal, query }) => {
      let q = ctx.db.selectFrom("sandbox_registries").selectAll().where("workspace_id", "=", principal.workspaceId);
      if (query.name_contains) q = q.where(nameContains(query.name_contains));
      const rows = await q.orderBy("name").limit(query.limit).offset(query.offset).execute();
      return c.json({ registries: rows.map(presentRegistry), offset: query.offset + rows.length });
    },
  });

  router.add({
    method: "get",
    path: "/sandboxes/registries/:name",
    summary: "Get an image registry by name or id",
    tags: TAGS,
    params,
    responses: { 200: { description: "The registry", schema: record }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params: p }) => {
      const row = await findRegistry(ctx, principal.workspaceId, p.name);
      if (!row) throw notFound("Registry");
      return c.json(presentRegistry(row));
    },
  });
}

function registerRegistryPatch(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "patch",
    path: "/sandboxes/registries/:name",
    summary: "Change an image registry (a new password replaces the old one)",
    tags: TAGS,
    params,
    body: patchBody,
    responses: {
      200: { description: "The registry", schema: record },
      404: { description: "Not found" },
      409: { description: "Name in use" },
    },
    handler: async ({ c, principal, params: p, body }) => {
      const row = await findRegistry(ctx, principal.workspaceId, p.name);
      if (!row) throw notFound("Registry");
      const set: Partial<RegistryRow> = { updated_at: nowIso(), updated_by: principal.userId };
      if (body.name !== undefined) set.name = body.name;
      if (body.url !== undefined) set.url = body.url;
      if (body.username !== undefined) set.username = body.username;
      if (body.password !== undefined) {
        const sealed = ctx.box.seal(body.password, aad(row.workspace_id, row.id));
        set.password_key_id = sealed.keyId;
        set.password_cipher = sealed.blob;
      }
      try {
        await ctx.db.updateTable("sandbox_registries").set(set).where("id", "=", row.id).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`A registry named ${body.name} already exists`);
        throw err;
      }
      return c.json(presentRegistry({ ...row, ...set }));
    },
  });
}

function registerRegistryDelete(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "delete",
    path: "/sandboxes/registries/:name",
    summary: "Delete an image registry",
    tags: TAGS,
    params,
    responses: { 204: { description: "Deleted" }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params: p }) => {
      const row = await findRegistry(ctx, principal.workspaceId, p.name);
      if (!row) throw notFound("Registry");
      await ctx.db.deleteFrom("sandbox_registries").where("id", "=", row.id).execute();
      return c.body(null, 204);
    },
  });
}
