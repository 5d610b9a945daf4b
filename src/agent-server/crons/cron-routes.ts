import type { Hono } from "hono";
import { newId } from "../../store/ids.ts";
import { getAssistant, resolveAssistantId } from "../storage/assistants.ts";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { CRON_FIELDS, cronCount, cronCreate, cronPatch, cronSearch, type CronCreateBody } from "./cron-schemas.ts";
import {
  countCrons,
  cronNotFound,
  deleteCron,
  findCronRow,
  insertCron,
  searchCrons,
  toCron,
  updateCron,
  type Cron,
} from "./crons.ts";
import { authorize, body, json, noContent, uuidAt, type C } from "../api/route-helpers.ts";
import { noAssistant } from "../runs/run-engine.ts";
import { getThread } from "../storage/threads.ts";

type CronField = (typeof CRON_FIELDS)[number];

/** A search's `select`: only the fields asked for (`now` is the server's clock, as the real server adds). */
function project(cron: Cron, select: CronField[] | null | undefined): Record<string, unknown> {
  if (!select?.length) return { ...cron };
  const now = new Date().toISOString();
  return Object.fromEntries(select.map((f) => [f, f === "now" ? now : cron[f]]));
}

const withoutUndefined = (o: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

/** `/runs/crons*` and `/threads/{id}/runs/crons`: scheduled runs (fired by `CronScheduler`). */
export function registerCronRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  registerCronCreate(app, ctx);
  registerCronQueries(app, ctx);
  registerCronItem(app, ctx);
}

async function createCron(ctx: AgentServerContext, c: C, b: CronCreateBody, threadId: string | null): Promise<Cron> {
  const assistant = await getAssistant(ctx, b.assistant_id, undefined, () => noAssistant(b.assistant_id));
  // A thread cron runs on the thread: the caller must be able to see it.
  if (threadId) await getThread(ctx, threadId, await authorize(ctx, c, "threads:read", { thread_id: threadId }));
  const { schedule, end_time, on_run_completed, enabled, ...run } = b;
  const auth = c.get("auth");
  const value = {
    cron_id: newId(),
    thread_id: threadId ?? undefined,
    user_id: auth?.user.identity ?? null,
    schedule,
    end_time: end_time ?? null,
    payload: withoutUndefined({ ...run, assistant_id: assistant.assistant_id }),
    metadata: { ...(b.metadata ?? {}) },
  };
  // The handler may rewrite the payload and metadata (e.g. stamp an owner); they are what is stored.
  await authorize(ctx, c, "crons:create", value);
  const metadata = {
    ...((value.payload.metadata as Record<string, unknown> | undefined) ?? {}),
    ...(value.metadata ?? {}),
  };
  return insertCron(ctx, {
    cronId: value.cron_id,
    assistantId: assistant.assistant_id,
    threadId,
    userId: value.user_id,
    schedule,
    payload: { ...value.payload, metadata },
    metadata,
    onRunCompleted: on_run_completed ?? "delete",
    enabled: enabled ?? true,
    endTime: end_time ?? null,
    auth,
  });
}

function registerCronCreate(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.post("/threads/:thread_id/runs/crons", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    return json(await createCron(ctx, c, await body(c, cronCreate), threadId));
  });

  app.post("/runs/crons", async (c) => json(await createCron(ctx, c, await body(c, cronCreate), null)));
}

function registerCronQueries(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.post("/runs/crons/search", async (c) => {
    const b = await body(c, cronSearch, {});
    const filters = await authorize(ctx, c, "crons:search", {
      assistant_id: b.assistant_id,
      thread_id: b.thread_id,
      limit: b.limit,
      offset: b.offset,
    });
    const assistantId = b.assistant_id ? resolveAssistantId(ctx, b.assistant_id) : null;
    const { items, total } = await searchCrons(ctx, { ...b, assistant_id: assistantId }, filters);
    return json(
      items.map((cron) => project(cron, b.select)),
      200,
      { "x-pagination-total": String(total) },
    );
  });

  app.post("/runs/crons/count", async (c) => {
    const b = await body(c, cronCount, {});
    const filters = await authorize(ctx, c, "crons:search", { assistant_id: b.assistant_id, thread_id: b.thread_id });
    return json(
      await countCrons(
        ctx,
        { ...b, assistant_id: b.assistant_id ? resolveAssistantId(ctx, b.assistant_id) : null },
        filters,
      ),
    );
  });
}

function registerCronItem(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.get("/runs/crons/:cron_id", async (c) => {
    const cronId = uuidAt(c, "cron_id");
    const row = await findCronRow(ctx.db, ctx, cronId, await authorize(ctx, c, "crons:read", { cron_id: cronId }));
    if (!row) throw cronNotFound(cronId);
    return json(toCron(row));
  });

  app.patch("/runs/crons/:cron_id", async (c) => {
    const cronId = uuidAt(c, "cron_id");
    const b = await body(c, cronPatch, {});
    const { schedule, end_time, on_run_completed, enabled, metadata, ...run } = b;
    const value = {
      cron_id: cronId,
      schedule,
      end_time,
      payload: withoutUndefined(run),
      metadata: { ...(metadata ?? {}) },
    };
    const filters = await authorize(ctx, c, "crons:update", value);
    return json(
      await updateCron(
        ctx,
        cronId,
        { schedule, end_time, payload: value.payload, metadata: value.metadata, on_run_completed, enabled },
        filters,
      ),
    );
  });

  app.delete("/runs/crons/:cron_id", async (c) => {
    const cronId = uuidAt(c, "cron_id");
    const filters = await authorize(ctx, c, "crons:delete", { cron_id: cronId });
    await deleteCron(ctx, cronId, filters);
    return noContent();
  });
}
