import { CronExpressionParser } from "cron-parser";

/**
 * Cron schedules, in UTC as on the LangGraph server: five fields (minute precision) or six
 * (with seconds first), or a `@daily`-style alias. cron-parser fills in missing fields, so the
 * field count is checked here: "1 2" must be an error, not a schedule.
 */
export function scheduleError(schedule: string): string | null {
  const text = schedule.trim();
  const fields = text.split(/\s+/).filter(Boolean).length;
  if (!text.startsWith("@") && (fields < 5 || fields > 6))
    return `Invalid cron schedule "${schedule}": expected 5 or 6 fields, got ${fields}`;
  try {
    CronExpressionParser.parse(text, { tz: "UTC" }).next();
    return null;
  } catch (err) {
    return `Invalid cron schedule "${schedule}": ${(err as Error).message}`;
  }
}

/** The first time after `after` the schedule fires, or null when that is past `endTime` (or never). */
export function nextRunDate(schedule: string, after: Date, endTime: string | null): string | null {
  let next: Date;
  try {
    next = CronExpressionParser.parse(schedule.trim(), { tz: "UTC", currentDate: after }).next().toDate();
  } catch {
    return null;
  }
  if (endTime !== null && next.getTime() > Date.parse(endTime)) return null;
  return next.toISOString();
}
