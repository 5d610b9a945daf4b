import { z } from "zod";
import type { RouteSpec } from "./route.ts";

const validationErrorSchema = {
  type: "object",
  properties: {
    detail: {
      type: "array",
      items: {
        type: "object",
        required: ["loc", "msg", "type"],
        properties: {
          loc: { type: "array", items: { anyOf: [{ type: "string" }, { type: "integer" }] } },
          msg: { type: "string" },
          type: { type: "string" },
        },
      },
    },
  },
};

function jsonSchema(schema: z.ZodType, io: "input" | "output"): Record<string, unknown> {
  try {
    const out = z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" }) as Record<
      string,
      unknown
    >;
    delete out.$schema;
    return out;
  } catch {
    return {};
  }
}

/** Collects every route as it is registered and renders an OpenAPI 3.1 document from the zod schemas. */
export class OpenApiRegistry {
  private readonly routes: Array<{ prefix: string; spec: RouteSpec }> = [];

  add(prefix: string, spec: RouteSpec): void {
    this.routes.push({ prefix, spec });
  }

  document(info: { title: string; version: string; description?: string }): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const { prefix, spec } of this.routes) {
      const path = (prefix + spec.path).replace(/:(\w+)(\{[^}]*\})?/g, "{$1}");
      const parameters: unknown[] = [];
      for (const [where, schema] of [
        ["path", spec.params],
        ["query", spec.query],
      ] as const) {
        if (!schema) continue;
        const js = jsonSchema(schema, "input") as { properties?: Record<string, unknown>; required?: string[] };
        for (const [name, s] of Object.entries(js.properties ?? {})) {
          parameters.push({
            name,
            in: where,
            required: where === "path" || (js.required ?? []).includes(name),
            schema: s,
          });
        }
      }
      const responses: Record<string, unknown> = {};
      for (const [status, r] of Object.entries(spec.responses)) {
        responses[status] = r.schema
          ? { description: r.description, content: { "application/json": { schema: jsonSchema(r.schema, "output") } } }
          : { description: r.description };
      }
      if (spec.body || spec.query || spec.params) {
        responses["422"] = {
          description: "Validation error",
          content: { "application/json": { schema: { $ref: "#/components/schemas/HTTPValidationError" } } },
        };
      }
      paths[path] ??= {};
      paths[path][spec.method] = {
        summary: spec.summary,
        tags: spec.tags,
        parameters,
        ...(spec.body
          ? {
              requestBody: {
                required: !spec.bodyOptional,
                content: { "application/json": { schema: jsonSchema(spec.body, "input") } },
              },
            }
          : {}),
        responses,
        ...(spec.auth === "none" ? { security: [] } : {}),
      };
    }
    return {
      openapi: "3.1.0",
      info,
      paths,
      components: {
        schemas: { HTTPValidationError: validationErrorSchema },
        securitySchemes: {
          ApiKey: { type: "apiKey", in: "header", name: "X-Api-Key" },
          Bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
          TenantId: { type: "apiKey", in: "header", name: "X-Tenant-Id" },
        },
      },
      security: [{ ApiKey: [] }, { Bearer: [] }, { ApiKey: [], TenantId: [] }, { Bearer: [], TenantId: [] }],
    };
  }
}
