import { useState } from "react";
import { api } from "../api.ts";
import { Empty, ErrorNote, Field, Status, useAction, useLoad, When } from "../ui.tsx";
import type { Snapshot } from "./Sandboxes.tsx";

const size = (n: number | null) =>
  n === null ? "—" : n > 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : `${Math.ceil(n / 1024)} KiB`;

export function Snapshots({ sandbox }: { sandbox: string }) {
  const list = useLoad(
    () => api<{ snapshots: Snapshot[] }>("/v2/sandboxes/snapshots?limit=100").then((r) => r.snapshots),
    [],
    3000,
  );
  const [name, setName] = useState("");
  const act = useAction();
  const take = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api(`/v2/sandboxes/boxes/${encodeURIComponent(sandbox)}/snapshot`, {
        method: "POST",
        json: { name: name.trim() },
      });
      setName("");
      await list.reload();
    });
  };
  const remove = (id: string) =>
    void act.run(async () => (await api(`/v2/sandboxes/snapshots/${id}`, { method: "DELETE" }), await list.reload()));
  return (
    <div>
      <form className="row card form" onSubmit={take}>
        <Field label="Snapshot this sandbox's files as" hint="lowercase letters, digits, . _ -">
          <input name="snapshot_name" value={name} onChange={(e) => setName(e.target.value)} required />
        </Field>
        <button className="primary" type="submit" disabled={act.busy}>
          Take snapshot
        </button>
      </form>
      <ErrorNote error={list.error ?? act.error} />
      {list.data?.length === 0 ? <Empty>No snapshots in this workspace.</Empty> : null}
      {list.data?.length ? (
        <table className="list">
          <thead>
            <tr>
              <th>Name</th>
              <th>Status</th>
              <th>Size</th>
              <th className="wide">Created</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {list.data.map((s) => (
              <tr key={s.id}>
                <td>
                  {s.name}:{s.tags[0]}
                </td>
                <td>
                  <Status value={s.status} />
                </td>
                <td>{size(s.size_bytes)}</td>
                <td className="wide">
                  <When iso={s.created_at} />
                </td>
                <td>
                  <button className="small danger" onClick={() => remove(s.id)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </div>
  );
}
