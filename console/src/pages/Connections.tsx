import { useState } from "react";
import { api, ApiError } from "../api.ts";
import { Empty, ErrorNote, Field, Page, Status, useAction, useLoad, When } from "../ui.tsx";

interface Provider {
  provider_id: string;
  name: string;
  client_id: string;
  has_client_secret: boolean;
  auth_url: string;
  redirect_uri: string;
  created_at: string;
}
interface Connection {
  id: string;
  provider_id: string;
  provider_account_label: string | null;
  scopes: string[];
  expires_at: string | null;
  created_at: string;
}
interface Flow {
  status: string;
  url?: string | null;
  auth_id?: string | null;
}

export function Connections() {
  const providers = useLoad(
    () =>
      api<Provider[] | { data?: Provider[]; providers?: Provider[] }>("/v2/auth/providers").then((r) =>
        Array.isArray(r) ? r : (r.providers ?? r.data ?? []),
      ),
    [],
  );
  const [adding, setAdding] = useState(false);
  const act = useAction();
  const remove = (id: string) =>
    void act.run(async () => {
      if (!confirm(`Delete provider ${id}? Its tokens are revoked and removed.`)) return;
      await api(`/v2/auth/providers/${encodeURIComponent(id)}`, { method: "DELETE" });
      await providers.reload();
    });
  return (
    <Page
      title="Connections"
      actions={
        <button className="primary" onClick={() => setAdding(!adding)}>
          {adding ? "Close" : "Add OAuth provider"}
        </button>
      }
    >
      {adding ? (
        <AddProvider
          onDone={() => {
            setAdding(false);
            void providers.reload();
          }}
        />
      ) : null}
      <ErrorNote error={providers.error ?? act.error} />
      <h2>OAuth providers</h2>
      {providers.data?.length === 0 ? (
        <Empty>No providers. Add your OAuth app (GitHub, Google, …) to let agents act for their users.</Empty>
      ) : null}
      {providers.data?.length ? (
        <table className="list">
          <thead>
            <tr>
              <th>Provider</th>
              <th className="wide">Redirect URI to register</th>
              <th>Secret</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {providers.data.map((p) => (
              <tr key={p.provider_id}>
                <td>
                  <strong>{p.provider_id}</strong>
                  <div className="muted small">{p.name}</div>
                </td>
                <td className="wide mono small">{p.redirect_uri}</td>
                <td>{p.has_client_secret ? "set" : "none"}</td>
                <td>
                  <button className="small danger" onClick={() => remove(p.provider_id)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <div className="split even">
        <ConnectFlow providers={providers.data ?? []} />
        <AgentConnections />
      </div>
    </Page>
  );
}

function AddProvider({ onDone }: { onDone: () => void }) {
  const [f, setF] = useState({
    provider_id: "",
    name: "",
    client_id: "",
    client_secret: "",
    auth_url: "",
    token_url: "",
  });
  const act = useAction();
  const issue = (k: string) =>
    act.error instanceof ApiError ? act.error.issues.find((i) => i.loc[1] === k)?.msg : undefined;
  const input = (k: keyof typeof f, label: string, type = "text") => (
    <Field label={label} error={issue(k)}>
      <input
        name={k}
        type={type}
        autoComplete="off"
        value={f[k]}
        onChange={(e) => setF({ ...f, [k]: e.target.value })}
      />
    </Field>
  );
  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      await api("/v2/auth/providers", {
        method: "POST",
        json: { ...f, name: f.name || f.provider_id, client_secret: f.client_secret || null },
      });
      onDone();
    });
  };
  return (
    <form className="card form" onSubmit={submit} aria-label="Add provider">
      <div className="row">
        {input("provider_id", "Provider id")}
        {input("name", "Display name")}
      </div>
      <div className="row">
        {input("client_id", "Client id")}
        {input("client_secret", "Client secret (write-only)", "password")}
      </div>
      <div className="row">
        {input("auth_url", "Authorize URL")}
        {input("token_url", "Token URL")}
      </div>
      <ErrorNote error={act.error} />
      <button className="primary" type="submit" disabled={act.busy}>
        Add provider
      </button>
    </form>
  );
}

function ConnectFlow({ providers }: { providers: Provider[] }) {
  const [provider, setProvider] = useState("");
  const [agent, setAgent] = useState("");
  const [scopes, setScopes] = useState("");
  const [flow, setFlow] = useState<Flow | null>(null);
  const act = useAction();
  const start = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () => {
      const body: Record<string, unknown> = {
        provider: provider || providers[0]?.provider_id,
        scopes: scopes.split(/[ ,]+/).filter(Boolean),
      };
      if (agent.trim()) body.agent_id = agent.trim();
      let f = await api<Flow>("/v2/auth/authenticate", { method: "POST", json: body });
      setFlow(f);
      // Long-poll until the person finishes at the provider (the callback may land on any process).
      while (f.status === "pending" && f.auth_id) {
        const w = await api<Flow>(`/v2/auth/wait/${f.auth_id}?timeout=25`);
        if (w.status === "pending" || w.status === "timeout") continue;
        f = w;
        setFlow(w);
      }
    });
  };
  return (
    <form className="pane card form" onSubmit={start} aria-label="Connect an account">
      <h2>Connect an account</h2>
      <Field label="Provider">
        <select value={provider} onChange={(e) => setProvider(e.target.value)}>
          {providers.map((p) => (
            <option key={p.provider_id} value={p.provider_id}>
              {p.provider_id}
            </option>
          ))}
        </select>
      </Field>
      <Field label="Agent (assistant id)" hint="Optional: attach the account to this agent">
        <input name="agent" value={agent} onChange={(e) => setAgent(e.target.value)} />
      </Field>
      <Field label="Scopes">
        <input name="scopes" value={scopes} onChange={(e) => setScopes(e.target.value)} placeholder="repo read:user" />
      </Field>
      <button className="primary" type="submit" disabled={act.busy || providers.length === 0}>
        {act.busy ? "Waiting for the provider…" : "Start"}
      </button>
      {flow?.url && flow.status === "pending" ? (
        <p>
          <a href={flow.url} target="_blank" rel="noreferrer">
            Open the provider's consent page ↗
          </a>
        </p>
      ) : null}
      {flow ? (
        <p>
          Status: <Status value={flow.status} />
        </p>
      ) : null}
      <ErrorNote error={act.error} />
    </form>
  );
}

function AgentConnections() {
  const [agent, setAgent] = useState("");
  const [rows, setRows] = useState<Connection[] | null>(null);
  const act = useAction();
  const load = (e: React.FormEvent) => {
    e.preventDefault();
    void act.run(async () =>
      setRows(
        (await api<{ data: Connection[] }>(`/v2/auth/agents/${encodeURIComponent(agent.trim())}/connections`)).data,
      ),
    );
  };
  const issue = act.error instanceof ApiError ? act.error.issues.find((i) => i.loc[1] === "agent_id")?.msg : undefined;
  return (
    <form className="pane card form" onSubmit={load} aria-label="Agent connections">
      <h2>An agent's connections</h2>
      <Field label="Agent (assistant id)" error={issue}>
        <input name="agent" value={agent} onChange={(e) => setAgent(e.target.value)} />
      </Field>
      <button type="submit" disabled={act.busy || !agent.trim()}>
        Show
      </button>
      {!issue ? <ErrorNote error={act.error} /> : null}
      {rows?.length === 0 ? <Empty>No connections for this agent.</Empty> : null}
      {rows?.length ? (
        <ul className="plain">
          {rows.map((c) => (
            <li key={c.id}>
              <strong>{c.provider_id}</strong> {c.provider_account_label ?? ""}{" "}
              <span className="muted">
                {c.scopes.join(" ")} · expires <When iso={c.expires_at} />
              </span>
            </li>
          ))}
        </ul>
      ) : null}
    </form>
  );
}
