import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { ApiError } from "./api.ts";
import { humanMessage, humanPath, issuesUnder, relativeTime, statusLabel, type ValidationItem } from "./decisions.ts";

export function Page(props: { title: string; actions?: ReactNode; children: ReactNode }) {
  return (
    <section className="page">
      <header className="page-head">
        <h1>{props.title}</h1>
        <div className="actions">{props.actions}</div>
      </header>
      {props.children}
    </section>
  );
}

const GOOD = /^(DEPLOYED|READY|ready|completed|ACTIVE|idle|success|inject)$/;
const BAD = /FAILED|failed|INTERRUPTED|error|block/;
/** A status pill: the API's value in `data-status`, in words ("Deploy failed") on screen. */
export function Status({ value, title }: { value: string | null | undefined; title?: string }) {
  const v = value ?? "—";
  const tone = GOOD.test(v) ? "good" : BAD.test(v) ? "bad" : /stopped|SKIPPED|deleting/.test(v) ? "muted" : "busy";
  return (
    <span className={`status ${tone}`} data-status={v} title={title}>
      {value ? statusLabel(v) : "—"}
    </span>
  );
}

/**
 * An error in words. A 422's items that a form shows at its inputs (`placed`) are not repeated:
 * the note then only points at them; the others are listed with their field in words.
 */
export function ErrorNote({ error, placed }: { error: unknown; placed?: (loc: ValidationItem["loc"]) => boolean }) {
  if (!error) return null;
  if (error instanceof ApiError && error.status === 422 && error.issues.length) {
    const rest = error.issues.filter((i) => !placed?.(i.loc));
    if (!rest.length)
      return (
        <div className="error" role="status">
          Some values need a change: see the messages at the fields.
        </div>
      );
    return (
      <div className="error" role="alert">
        {rest.map((i, k) => {
          const where = humanPath(i.loc.filter((p) => p !== "body" && p !== "query" && p !== "path").join("."));
          return (
            <div key={k}>
              {where ? `${where.charAt(0).toUpperCase() + where.slice(1)}: ` : ""}
              {humanMessage(i.msg)}
            </div>
          );
        })}
      </div>
    );
  }
  const msg = error instanceof Error ? error.message : String(error);
  return (
    <div className="error" role="alert">
      {msg}
    </div>
  );
}

/** A time as "5 minutes ago" (the exact local time on hover), refreshed with the page's data. */
export function When({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <>—</>;
  return (
    <time dateTime={iso} title={new Date(iso).toLocaleString()}>
      {relativeTime(iso)}
    </time>
  );
}

/** Loads data, reloads on demand or on an interval; errors are shown, never thrown. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], everyMs = 0) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const alive = useRef(true);
  const reload = useCallback(
    () =>
      load().then(
        (d) => alive.current && (setData(d), setError(null)),
        (e) => alive.current && setError(e),
      ),
    deps,
  );
  useEffect(() => {
    alive.current = true;
    void reload();
    const t = everyMs ? setInterval(() => void reload(), everyMs) : null;
    return () => {
      alive.current = false;
      if (t) clearInterval(t);
    };
  }, [reload, everyMs]);
  return { data, error, reload, setData };
}

/** Runs an action with a busy flag and its error kept for display. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async <T,>(fn: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, setError };
}

/** The 422 messages whose `loc` starts with `prefix` (e.g. ["body","proxy_config"]). */
export function issuesAt(error: unknown, prefix: Array<string | number>): Array<{ path: string; msg: string }> {
  return error instanceof ApiError ? issuesUnder(error.issues, prefix) : [];
}

export function Field(props: { label: string; hint?: string; error?: string | null; children: ReactNode }) {
  return (
    <label className={`field${props.error ? " invalid" : ""}`}>
      <span className="label">{props.label}</span>
      {props.children}
      {props.hint && !props.error ? <span className="hint">{props.hint}</span> : null}
      {props.error ? (
        <span className="field-error" role="alert">
          {humanMessage(props.error)}
        </span>
      ) : null}
    </label>
  );
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : "—");

/** `placed` for ErrorNote: the 422 items at or under these body fields are shown at their inputs. */
export const placedAt =
  (...fields: string[]) =>
  (loc: ValidationItem["loc"]) =>
    loc[0] === "body" && fields.includes(String(loc[1]));

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

export function Progress({ fraction, label }: { fraction: number | null; label: string }) {
  return (
    <div
      className="progress"
      role="progressbar"
      aria-label={label}
      aria-valuenow={fraction === null ? undefined : Math.round(fraction * 100)}
    >
      <div
        className={`bar${fraction === null ? " indeterminate" : ""}`}
        style={fraction === null ? undefined : { width: `${Math.round(fraction * 100)}%` }}
      />
      <span>{label}</span>
    </div>
  );
}
