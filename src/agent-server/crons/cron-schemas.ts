import { z } from "zod";
import { scheduleError } from "./cron-schedule.ts";
import { runConfig, runCreate } from "../api/schemas.ts";

/** Request bodies of `/runs/crons*`. Unknown fields are ignored, as for the other bodies. */
const obj = z.record(z.string(), z.unknown());
const interruptNodes = z.union([z.literal("*"), z.array(z.string())]);

const schedule = z.string().superRefine((value, ctx) => {
  const error = scheduleError(value);
  if (error) ctx.addIssue({ code: "custom", message: error });
});

// Clients send Python `datetime.isoformat()` (maybe without an offset, meaning UTC) or JS ISO strings.
const endTime = z.iso
  .datetime({ offset: true, local: true })
  .transform((s) => new Date(/(Z|[+-]\d\d:?\d\d)$/i.test(s) ? s : `${s}Z`).toISOString());

const onRunCompleted = z.enum(["delete", "keep"]);

export const cronCreate = runCreate.extend({
  schedule,
  end_time: endTime.nullish(),
  on_run_completed: onRunCompleted.nullish(),
  enabled: z.boolean().nullish(),
});

export const CRON_SORT_BY = [
  "cron_id",
  "assistant_id",
  "thread_id",
  "created_at",
  "updated_at",
  "next_run_date",
] as const;
export const CRON_FIELDS = [
  "cron_id",
  "assistant_id",
  "thread_id",
  "on_run_completed",
  "end_time",
  "schedule",
  "created_at",
  "updated_at",
  "user_id",
  "payload",
  "next_run_date",
  "metadata",
  "enabled",
  "now",
] as const;

export const cronSearch = z.looseObject({
  assistant_id: z.string().nullish(),
  thread_id: z.string().uuid().nullish(),
  enabled: z.boolean().nullish(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: z.number().int().min(0).default(0),
  sort_by: z.enum(CRON_SORT_BY).nullish(),
  sort_order: z.enum(["asc", "desc"]).nullish(),
  select: z.array(z.enum(CRON_FIELDS)).nullish(),
});

export const cronCount = z.looseObject({
  assistant_id: z.string().nullish(),
  thread_id: z.string().uuid().nullish(),
  enabled: z.boolean().nullish(),
});

export const cronPatch = z.looseObject({
  schedule: schedule.optional(),
  end_time: endTime.nullish(),
  input: z.unknown().optional(),
  metadata: obj.nullish(),
  config: runConfig.nullish(),
  context: obj.nullish(),
  webhook: z.string().url().nullish(),
  interrupt_before: interruptNodes.nullish(),
  interrupt_after: interruptNodes.nullish(),
  on_run_completed: onRunCompleted.nullish(),
  enabled: z.boolean().nullish(),
});

export type CronCreateBody = z.infer<typeof cronCreate>;
export type CronSearchBody = z.infer<typeof cronSearch>;
export type CronCountBody = z.infer<typeof cronCount>;
export type CronPatchBody = z.infer<typeof cronPatch>;
