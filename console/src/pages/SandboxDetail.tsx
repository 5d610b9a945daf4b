import { lazy, useEffect, useState } from "react";
import { api, localPath } from "../api.ts";
import { go, href } from "../router.ts";
import { ErrorNote, Page, placedAt, Status, useAction, useLoad, When } from "../ui.tsx";
import type { Sandbox } from "./Sandboxes.tsx";
import { Files } from "./Files.tsx";
import { EgressLog } from "./EgressLog.tsx";
import { Snapshots } from "./Snapshots.tsx";
import { ProxyConfigEditor, cleanProxyConfig, type ProxyConfig } from "./ProxyConfigEditor.tsx";

// xterm.js is large: it loads when a terminal opens, not with the console.
const Terminal = lazy(() => import("./Terminal.tsx"));

const TABS: Array<[string, string]> = [
  ["terminal", "Terminal"],
  ["files", "Files"],
  ["proxy", "Egress rules"],
  ["egress", "Egress log"],
  ["snapshots", "Snapshots"],
];

export function SandboxDetail({ name, tab }: { name: string; tab: string }) {
  const box = useLoad(() => api<Sandbox>(`/v2/sandboxes/boxes/${encodeURIComponent(name)}`), [name], 3000);
  const act = useAction();
  const s = box.data;
  const verb = (v: "stop" | "start" | "delete") =>
    void act.run(async () => {
      if (v === "delete") {
        if (!confirm(`Delete sandbox ${name}?`)) return;
        await api(`/v2/sandboxes/boxes/${encodeURIComponent(name)}`, { method: "DELETE" });
        return go("sandboxes");
      }
      await api(`/v2/sandboxes/boxes/${encodeURIComponent(name)}/${v}`, { method: "POST", json: {} });
      await box.reload();
    });
  const dp = s ? localPath(s.dataplane_url) : "";
  return (
    <Page
      title={name}
      actions={
        <>
          {s?.status === "ready" ? (
            <button onClick={() => verb("stop")} disabled={act.busy}>
              Stop
            </button>
          ) : null}
          {s && (s.status === "stopped" || s.status === "failed") ? (
            <button onClick={() => verb("start")} disabled={act.busy}>
              Start
            </button>
          ) : null}
          <button className="danger" onClick={() => verb("delete")} disabled={act.busy}>
            Delete
          </button>
        </>
      }
    >
      <ErrorNote error={box.error ?? act.error} />
      {s ? (
        <dl className="facts">
          <dt>Status</dt>
          <dd>
            <Status value={s.status} /> {s.status_message ? <span className="muted">{s.status_message}</span> : null}
          </dd>
          <dt>Memory</dt>
          <dd>{Math.round(s.mem_bytes / 2 ** 20)} MiB</dd>
          <dt>Disk</dt>
          <dd>{Math.round(s.fs_capacity_bytes / 2 ** 30)} GiB</dd>
          <dt>Created</dt>
          <dd>
            <When iso={s.created_at} />
          </dd>
        </dl>
      ) : null}
      <div className="tabs" role="tablist">
        {TABS.map(([k, label]) => (
          <a key={k} role="tab" href={href("sandboxes", name, k)} className={tab === k ? "on" : ""}>
            {label}
          </a>
        ))}
      </div>
      {s && tab === "terminal" ? (
        s.status === "ready" ? (
          <Terminal dataplane={dp} />
        ) : (
          <p className="muted">The terminal needs a ready sandbox; start it first.</p>
        )
      ) : null}
      {s && tab === "files" ? <Files dataplane={dp} /> : null}
      {s && tab === "proxy" ? <ProxyTab sandbox={s} onSaved={() => void box.reload()} /> : null}
      {s && tab === "egress" ? <EgressLog sandbox={name} /> : null}
      {s && tab === "snapshots" ? <Snapshots sandbox={name} /> : null}
    </Page>
  );
}

function ProxyTab({ sandbox, onSaved }: { sandbox: Sandbox; onSaved: () => void }) {
  const [value, setValue] = useState<ProxyConfig>(sandbox.proxy_config ?? {});
  const [saved, setSaved] = useState(false);
  const act = useAction();
  useEffect(() => setSaved(false), [value]);
  const save = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api(`/v2/sandboxes/boxes/${encodeURIComponent(sandbox.name)}`, {
        method: "PATCH",
        json: { proxy_config: cleanProxyConfig(value) ?? {} },
      });
      setSaved(true);
      onSaved();
    });
  };
  return (
    <form className="card form" onSubmit={save} aria-label="Egress rules">
      <div className="row center wrap form-head">
        <p className="muted">
          Replaces the sandbox's proxy configuration live; the next request uses it. Write-only values are never shown.
        </p>
        <button className="primary" type="submit" disabled={act.busy}>
          {act.busy ? "Applying…" : "Apply"}
        </button>
      </div>
      <ErrorNote error={act.error} placed={placedAt("proxy_config")} />
      {saved ? (
        <p className="ok" role="status">
          Saved and applied.
        </p>
      ) : null}
      <ProxyConfigEditor value={value} onChange={setValue} error={act.error} />
    </form>
  );
}
