import { useState } from "react";
import { api } from "../api.ts";
import { Empty, ErrorNote, Field, Page, useAction, useLoad, When } from "../ui.tsx";

interface SecretRow {
  key: string;
  created_at: string;
  updated_at: string;
}
interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export function Settings() {
  return (
    <Page title="Secrets & API keys">
      <Secrets />
      <ApiKeys />
    </Page>
  );
}

/** Names and times only: a value is write-only, typed into a password field and never read back. */
function Secrets() {
  const list = useLoad(() => api<SecretRow[]>("/v2/secrets"), []);
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const act = useAction();
  const save = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api("/v2/secrets", { method: "PUT", json: [{ key: key.trim(), value }] });
      setKey("");
      setValue("");
      await list.reload();
    });
  };
  const remove = (k: string) =>
    void act.run(async () =>
      confirm(`Delete secret ${k}?`)
        ? (await api(`/v2/secrets/${encodeURIComponent(k)}`, { method: "DELETE" }), await list.reload())
        : undefined,
    );
  return (
    <section className="card">
      <h2>Workspace secrets</h2>
      <form className="row form" onSubmit={save} aria-label="Set secret">
        <Field label="Name">
          <input
            name="secret_key"
            value={key}
            onChange={(e) => setKey(e.target.value)}
            required
            placeholder="OPENAI_API_KEY"
          />
        </Field>
        <Field label="Value (write-only)">
          <input
            name="secret_value"
            type="password"
            autoComplete="new-password"
            value={value}
            onChange={(e) => setValue(e.target.value)}
            required
          />
        </Field>
        <button className="primary" type="submit" disabled={act.busy}>
          Set or replace
        </button>
      </form>
      <ErrorNote error={list.error ?? act.error} />
      {list.data?.length === 0 ? <Empty>No secrets yet.</Empty> : null}
      {list.data?.length ? (
        <table className="list">
          <thead>
            <tr>
              <th>Name</th>
              <th className="wide">Created</th>
              <th>Updated</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {list.data.map((s) => (
              <tr key={s.key}>
                <td className="mono">{s.key}</td>
                <td className="wide">
                  <When iso={s.created_at} />
                </td>
                <td>
                  <When iso={s.updated_at} />
                </td>
                <td className="row-actions">
                  <button className="small" onClick={() => setKey(s.key)}>
                    Replace
                  </button>
                  <button className="small danger" onClick={() => remove(s.key)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

function ApiKeys() {
  const list = useLoad(() => api<ApiKey[]>("/v2/api-keys"), []);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<string | null>(null);
  const act = useAction();
  const create = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const r = await api<ApiKey & { key: string }>("/v2/api-keys", { method: "POST", json: { name: name.trim() } });
      setCreated(r.key);
      setName("");
      await list.reload();
    });
  };
  const revoke = (k: ApiKey) =>
    void act.run(async () =>
      confirm(`Revoke key ${k.name}? It stops working at once.`)
        ? (await api(`/v2/api-keys/${k.id}`, { method: "DELETE" }), await list.reload())
        : undefined,
    );
  return (
    <section className="card">
      <h2>API keys</h2>
      <form className="row form" onSubmit={create} aria-label="Create API key">
        <Field label="Name">
          <input name="key_name" value={name} onChange={(e) => setName(e.target.value)} required placeholder="ci" />
        </Field>
        <button className="primary" type="submit" disabled={act.busy}>
          Create key
        </button>
      </form>
      {created ? (
        <div className="once" role="status">
          <strong>Copy this key now: it is not shown again.</strong>
          <code data-testid="new-key">{created}</code>
          <button className="small" onClick={() => void navigator.clipboard?.writeText(created)}>
            Copy
          </button>
          <button className="small" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      ) : null}
      <ErrorNote error={list.error ?? act.error} />
      {list.data?.length ? (
        <table className="list">
          <thead>
            <tr>
              <th>Name</th>
              <th className="wide">Prefix</th>
              <th className="wide">Last used</th>
              <th>State</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {list.data.map((k) => (
              <tr key={k.id} className={k.revoked_at ? "revoked" : ""}>
                <td>{k.name}</td>
                <td className="mono wide">{k.prefix}…</td>
                <td className="wide">
                  <When iso={k.last_used_at} />
                </td>
                <td>
                  {k.revoked_at ? (
                    <>
                      revoked <When iso={k.revoked_at} />
                    </>
                  ) : (
                    "active"
                  )}
                </td>
                <td>
                  {k.revoked_at ? null : (
                    <button className="small danger" onClick={() => revoke(k)}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
