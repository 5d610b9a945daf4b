import { useEffect, useState } from "react";
import { api } from "../api.ts";
import { Empty, ErrorNote, Status, useLoad } from "../ui.tsx";
import { filterAudit, type AuditEntry } from "../decisions.ts";

const KINDS = ["", "inject", "block", "tunnel", "sign", "callback", "credential"];
const WINDOWS: Array<[string, number]> = [
  ["all time", 0],
  ["last 5 minutes", 5],
  ["last hour", 60],
  ["last 24 hours", 1440],
];

export function EgressLog({ sandbox }: { sandbox: string }) {
  const [kind, setKind] = useState("");
  const [host, setHost] = useState("");
  const [rule, setRule] = useState("");
  const [minutes, setMinutes] = useState(0);
  const base = `/v2/sandboxes/boxes/${encodeURIComponent(sandbox)}/egress-log?limit=200${kind ? `&kind=${kind}` : ""}`;
  const log = useLoad(() => api<{ entries: AuditEntry[]; next_before: string | null }>(base), [base], 3000);
  // Older pages, fetched on demand with the API's `before` cursor; the newest page keeps refreshing.
  const [older, setOlder] = useState<{ entries: AuditEntry[]; next: string | null } | null>(null);
  useEffect(() => setOlder(null), [base]);
  const cursor = older ? older.next : (log.data?.next_before ?? null);
  const loadOlder = async () => {
    if (!cursor) return;
    const page = await api<{ entries: AuditEntry[]; next_before: string | null }>(
      `${base}&before=${encodeURIComponent(cursor)}`,
    );
    setOlder({ entries: [...(older?.entries ?? []), ...page.entries], next: page.next_before });
  };
  const all = [...(log.data?.entries ?? []), ...(older?.entries ?? [])];
  const rows = filterAudit(all, { host, rule, minutes });
  return (
    <div className="egress">
      <div className="row filters">
        <label className="field">
          <span className="label">Kind</span>
          <select name="kind" value={kind} onChange={(e) => setKind(e.target.value)}>
            {KINDS.map((k) => (
              <option key={k} value={k}>
                {k || "any"}
              </option>
            ))}
          </select>
        </label>
        <label className="field">
          <span className="label">Host</span>
          <input name="host" value={host} onChange={(e) => setHost(e.target.value)} placeholder="api.example.com" />
        </label>
        <label className="field">
          <span className="label">Rule</span>
          <input name="rule" value={rule} onChange={(e) => setRule(e.target.value)} />
        </label>
        <label className="field">
          <span className="label">Time</span>
          <select name="window" value={minutes} onChange={(e) => setMinutes(Number(e.target.value))}>
            {WINDOWS.map(([l, m]) => (
              <option key={m} value={m}>
                {l}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorNote error={log.error} />
      {log.data && rows.length === 0 ? <Empty>No egress events match.</Empty> : null}
      {rows.length ? (
        <table className="list audit">
          <thead>
            <tr>
              <th>When</th>
              <th>Kind</th>
              <th>Host</th>
              <th className="wide">Request</th>
              <th>Rule</th>
              <th>×</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((e) => (
              <tr key={e.id} data-kind={e.kind}>
                <td>{new Date(e.last_at).toLocaleTimeString()}</td>
                <td>
                  <Status value={e.kind} />
                </td>
                <td className="mono">
                  {e.host}:{e.port}
                </td>
                <td className="wide mono">
                  {e.method ?? ""} {e.path ?? ""} {e.status ? `→ ${e.status}` : ""}{" "}
                  {e.reason ? <span className="muted">{e.reason}</span> : null}
                </td>
                <td>{e.rule ?? "—"}</td>
                <td>{e.count}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {cursor ? <button onClick={() => void loadOlder()}>Load older events</button> : null}
    </div>
  );
}
