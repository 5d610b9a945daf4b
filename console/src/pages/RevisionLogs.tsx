import { useEffect, useRef, useState } from "react";
import { api } from "../api.ts";

interface LogLine {
  id: string;
  timestamp: string;
  level: string;
  message: string;
}

/** Tails a revision's build or deploy log: pages after the last line seen, every second while live. */
export function RevisionLogs({ base, kind, live }: { base: string; kind: "build" | "deploy"; live: boolean }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const last = useRef<string | null>(null);
  const box = useRef<HTMLPreElement>(null);
  useEffect(() => {
    setLines([]);
    last.current = null;
  }, [base, kind]);
  useEffect(() => {
    let stop = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const pull = async () => {
      try {
        for (;;) {
          const q = new URLSearchParams({ limit: "500" });
          if (last.current) q.set("offset", last.current);
          const page = await api<{ logs: LogLine[]; next_offset: string | null }>(`${base}/${kind}_logs?${q}`);
          if (stop) return;
          if (page.logs.length) {
            last.current = page.logs[page.logs.length - 1].id;
            setLines((l) => [...l, ...page.logs]);
          }
          if (!page.next_offset) break;
        }
      } catch {
        // a transient failure: the next tick retries from the same place
      }
      if (!stop && live) timer = setTimeout(() => void pull(), 1000);
    };
    void pull();
    return () => {
      stop = true;
      clearTimeout(timer);
    };
  }, [base, kind, live]);
  useEffect(() => {
    const el = box.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [lines]);
  return (
    <pre className="logs" ref={box} data-testid={`${kind}-logs`}>
      {lines.length === 0 ? <span className="muted">{live ? "Waiting for log lines…" : "No log lines."}</span> : null}
      {lines.map((l) => (
        <div key={l.id} className={`log ${l.level}`}>
          <span className="ts">{new Date(l.timestamp).toLocaleTimeString()}</span> {l.message}
        </div>
      ))}
    </pre>
  );
}
