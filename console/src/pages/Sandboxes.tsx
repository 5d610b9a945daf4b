import { useState } from "react";
import { api } from "../api.ts";
import { go, href } from "../router.ts";
import { Empty, ErrorNote, Field, Page, Status, issuesAt, placedAt, useAction, useLoad, When } from "../ui.tsx";
import { ProxyConfigEditor, cleanProxyConfig, type ProxyConfig } from "./ProxyConfigEditor.tsx";

export interface Sandbox {
  id: string;
  name: string;
  status: string;
  status_message: string | null;
  dataplane_url: string;
  snapshot_id: string | null;
  mem_bytes: number;
  fs_capacity_bytes: number;
  idle_ttl_seconds: number;
  proxy_config: ProxyConfig | null;
  created_at: string;
}
export interface Snapshot {
  id: string;
  name: string;
  status: string;
  size_bytes: number | null;
  tags: string[];
  created_at: string;
}

export function Sandboxes() {
  const list = useLoad(
    () => api<{ sandboxes: Sandbox[] }>("/v2/sandboxes/boxes?limit=100").then((r) => r.sandboxes),
    [],
    3000,
  );
  const [creating, setCreating] = useState(false);
  const act = useAction();
  const lifecycle = (s: Sandbox, verb: "stop" | "start" | "delete") =>
    void act.run(async () => {
      if (verb === "delete") {
        if (!confirm(`Delete sandbox ${s.name} and its files?`)) return;
        await api(`/v2/sandboxes/boxes/${encodeURIComponent(s.name)}`, { method: "DELETE" });
      } else await api(`/v2/sandboxes/boxes/${encodeURIComponent(s.name)}/${verb}`, { method: "POST", json: {} });
      await list.reload();
    });
  return (
    <Page
      title="Sandboxes"
      actions={
        <button className="primary" onClick={() => setCreating(!creating)}>
          {creating ? "Close" : "New sandbox"}
        </button>
      }
    >
      {creating ? <CreateSandbox /> : null}
      <ErrorNote error={list.error ?? act.error} />
      {list.data && list.data.length === 0 ? (
        <Empty>No sandboxes. Create one to run commands, move files and try egress rules.</Empty>
      ) : null}
      {list.data?.length ? (
        <table className="list">
          <thead>
            <tr>
              <th>Name</th>
              <th>Status</th>
              <th className="wide">Created</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {list.data.map((s) => (
              <tr key={s.id}>
                <td>
                  <a href={href("sandboxes", s.name)}>{s.name}</a>
                </td>
                <td>
                  <Status value={s.status} />
                </td>
                <td className="wide">
                  <When iso={s.created_at} />
                </td>
                <td className="row-actions">
                  {s.status === "ready" ? (
                    <button className="small" onClick={() => lifecycle(s, "stop")}>
                      Stop
                    </button>
                  ) : null}
                  {s.status === "stopped" || s.status === "failed" ? (
                    <button className="small" onClick={() => lifecycle(s, "start")}>
                      Start
                    </button>
                  ) : null}
                  <button className="small danger" onClick={() => lifecycle(s, "delete")}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </Page>
  );
}

function CreateSandbox() {
  const snaps = useLoad(
    () =>
      api<{ snapshots: Snapshot[] }>("/v2/sandboxes/snapshots?limit=100").then((r) =>
        r.snapshots.filter((s) => s.status === "ready"),
      ),
    [],
  );
  const [name, setName] = useState("");
  const [snapshot, setSnapshot] = useState("");
  const [proxy, setProxy] = useState<ProxyConfig>({});
  const act = useAction();
  const bodyIssue = (field: string) => issuesAt(act.error, ["body", field])[0]?.msg;
  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const body: Record<string, unknown> = { wait_for_ready: true, timeout: 60 };
      if (name.trim()) body.name = name.trim();
      if (snapshot) body.snapshot_id = snapshot;
      const pc = cleanProxyConfig(proxy);
      if (pc) body.proxy_config = pc;
      const created = await api<Sandbox>("/v2/sandboxes/boxes", { method: "POST", json: body });
      go("sandboxes", created.name);
    });
  };
  return (
    <form className="card form" onSubmit={submit} aria-label="New sandbox">
      <div className="row">
        <Field label="Name" error={bodyIssue("name")}>
          <input
            name="name"
            placeholder="generated when empty"
            value={name}
            onChange={(e) => setName(e.target.value)}
          />
        </Field>
        <Field label="Start from" error={bodyIssue("snapshot_id")}>
          <select name="snapshot" value={snapshot} onChange={(e) => setSnapshot(e.target.value)}>
            <option value="">Base image</option>
            {snaps.data?.map((s) => (
              <option key={s.id} value={s.id}>
                Snapshot {s.name}:{s.tags[0]}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <details className="proxy-details">
        <summary>Egress proxy configuration</summary>
        <ProxyConfigEditor value={proxy} onChange={setProxy} error={act.error} />
      </details>
      <ErrorNote error={act.error} placed={placedAt("name", "snapshot_id", "proxy_config")} />
      <button className="primary" type="submit" disabled={act.busy}>
        {act.busy ? "Creating… (waits until ready)" : "Create sandbox"}
      </button>
    </form>
  );
}
