import { useState } from "react";
import { api, ApiError } from "../api.ts";
import { go, href } from "../router.ts";
import { deploymentState, sourceLabel } from "../decisions.ts";
import { Empty, ErrorNote, Field, Page, placedAt, Status, useAction, useLoad, When } from "../ui.tsx";
import {
  parseSecrets,
  SourcePicker,
  sourceFields,
  UploadProgress,
  useUploadProgress,
  type SourceChoice,
} from "./deploy-source.tsx";

export interface Deployment {
  id: string;
  name: string;
  status: string;
  source: string;
  source_config: { custom_url?: string; repo_url?: string };
  secrets: Array<{ name: string; value: null }>;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  created_at: string;
  updated_at: string;
}

/** Each deployment with its latest revision, whose status says whether anything serves yet. */
async function loadWithRevisions(): Promise<Array<Deployment & { latest: { status: string } | null }>> {
  const list = (await api<{ resources: Deployment[] }>("/v2/deployments?limit=100")).resources;
  return Promise.all(
    list.map(async (d) => ({
      ...d,
      latest: d.latest_revision_id
        ? await api<{ status: string }>(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`).catch(() => null)
        : null,
    })),
  );
}

/** The status pill of a deployment: its revisions' state rather than the bare `READY`. */
export function DeploymentStatus({ d, latest }: { d: Deployment; latest: { status: string } | null }) {
  const s = deploymentState(d.status, latest, Boolean(d.active_revision_id));
  return (
    <>
      <Status value={s.status} />
      {s.note ? <span className="muted small"> {s.note}</span> : null}
    </>
  );
}

export function Deployments() {
  const list = useLoad(loadWithRevisions, [], 3000);
  const [creating, setCreating] = useState(false);
  return (
    <Page
      title="Deployments"
      actions={
        <button className="primary" onClick={() => setCreating(!creating)}>
          {creating ? "Close" : "New deployment"}
        </button>
      }
    >
      {creating ? <CreateDeployment /> : null}
      <ErrorNote error={list.error} />
      {list.data && list.data.length === 0 ? (
        <Empty>No deployments yet. Upload a project with a langgraph.json, or give a git URL.</Empty>
      ) : null}
      {list.data?.length ? (
        <table className="list">
          <thead>
            <tr>
              <th>Name</th>
              <th>Status</th>
              <th className="wide">Source</th>
              <th className="wide">Updated</th>
            </tr>
          </thead>
          <tbody>
            {list.data.map((d) => (
              <tr key={d.id}>
                <td>
                  <a href={href("deployments", d.id)}>{d.name}</a>
                </td>
                <td>
                  <DeploymentStatus d={d} latest={d.latest} />
                </td>
                <td className="wide">{sourceLabel(d.source, d.source_config.repo_url)}</td>
                <td className="wide">
                  <When iso={d.updated_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </Page>
  );
}

function CreateDeployment() {
  const [name, setName] = useState("");
  const [configPath, setConfigPath] = useState("langgraph.json");
  const [secrets, setSecrets] = useState("");
  const [source, setSource] = useState<SourceChoice>({ kind: "tarball", file: null });
  const [progress, setProgress] = useUploadProgress();
  const action = useAction();
  const issue = (field: string) =>
    action.error instanceof ApiError ? action.error.issues.find((i) => i.loc.includes(field))?.msg : undefined;
  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const fields = await sourceFields(source, configPath, null, setProgress);
      const created = await api<Deployment>("/v2/deployments", {
        method: "POST",
        json: { name: name.trim(), ...fields, secrets: parseSecrets(secrets) },
      });
      go("deployments", created.id);
    });
  };
  return (
    <form className="card form" onSubmit={submit} aria-label="New deployment">
      <div className="row">
        <Field label="Name" error={issue("name")}>
          <input name="name" required value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <Field label="Config path" error={issue("langgraph_config_path")}>
          <input name="config_path" value={configPath} onChange={(e) => setConfigPath(e.target.value)} />
        </Field>
      </div>
      <SourcePicker
        value={source}
        onChange={setSource}
        errors={{ repo_url: issue("repo_url") ?? "", repo_ref: issue("repo_ref") ?? "" }}
      />
      <Field label="Secrets" hint="One NAME=value per line; values are write-only" error={issue("secrets")}>
        <textarea
          name="secrets"
          rows={2}
          value={secrets}
          onChange={(e) => setSecrets(e.target.value)}
          spellCheck={false}
        />
      </Field>
      <UploadProgress p={progress} />
      <ErrorNote
        error={action.error}
        placed={placedAt("name", "langgraph_config_path", "repo_url", "repo_ref", "secrets")}
      />
      <button className="primary" type="submit" disabled={action.busy}>
        {action.busy ? "Creating…" : "Deploy"}
      </button>
    </form>
  );
}
