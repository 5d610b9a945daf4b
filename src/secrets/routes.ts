import { z } from "zod";
import { notFound, ValidationFailed } from "../http/errors.ts";
import type { Feature } from "../platform/context.ts";
import { deleteSecret, listSecrets, upsertSecrets } from "./secret-store.ts";

export const SECRET_KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;
const MAX_SECRET_VALUE_BYTES = 64 * 1024;

const secretKey = z
  .string()
  .regex(SECRET_KEY_PATTERN, "Secret keys are 1-128 characters: letters, digits, _ . - and not starting with a digit");
const secretSummary = z.object({ key: z.string(), created_at: z.string(), updated_at: z.string() });

const upsertBody = z
  .array(
    z
      .object({
        key: secretKey,
        value: z
          .string()
          .refine(
            (v) => Buffer.byteLength(v) <= MAX_SECRET_VALUE_BYTES,
            `Secret values are at most ${MAX_SECRET_VALUE_BYTES} bytes`,
          ),
      })
      .strict(),
  )
  .min(1)
  .max(100);

export const secretsFeature: Feature = {
  name: "secrets",
  routes(router, ctx) {
    router.add({
      method: "get",
      path: "/secrets",
      summary: "List workspace secrets (names and timestamps; values are never returned)",
      tags: ["secrets"],
      responses: { 200: { description: "Secrets", schema: z.array(secretSummary) } },
      handler: async ({ c, principal }) => c.json(await listSecrets(ctx.db, principal.workspaceId)),
    });
    router.add({
      method: "put",
      path: "/secrets",
      summary: "Create or replace workspace secrets",
      tags: ["secrets"],
      body: upsertBody,
      responses: { 200: { description: "The written secrets, without values", schema: z.array(secretSummary) } },
      handler: async ({ c, principal, body }) => {
        const seen = new Map<string, number>();
        body.forEach((item, i) => {
          if (seen.has(item.key))
            throw new ValidationFailed([
              {
                loc: ["body", i, "key"],
                msg: `Value error, duplicate key ${item.key} (also at index ${seen.get(item.key)})`,
                type: "value_error",
              },
            ]);
          seen.set(item.key, i);
        });
        return c.json(await upsertSecrets(ctx.db, ctx.box, principal.workspaceId, body));
      },
    });
    router.add({
      method: "delete",
      path: "/secrets/:key",
      summary: "Delete a workspace secret",
      tags: ["secrets"],
      params: z.object({ key: secretKey }),
      responses: { 204: { description: "Deleted" }, 404: { description: "No such secret" } },
      handler: async ({ c, principal, params }) => {
        if (!(await deleteSecret(ctx.db, principal.workspaceId, params.key))) throw notFound("Secret");
        return c.body(null, 204);
      },
    });
  },
};
