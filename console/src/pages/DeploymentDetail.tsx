import { useState } from "react";
import { api } from "../api.ts";
import { go, href } from "../router.ts";
import { ErrorNote, Field, Page, Progress, Status, useAction, useLoad, When } from "../ui.tsx";
import { DeploymentStatus, type Deployment } from "./Deployments.tsx";
import { sourceLabel } from "../decisions.ts";
import {
  parseSecrets,
  SourcePicker,
  sourceFields,
  UploadProgress,
  useUploadProgress,
  type SourceChoice,
} from "./deploy-source.tsx";
import { RevisionLogs } from "./RevisionLogs.tsx";

interface Revision {
  id: string;
  status: string;
  status_message: string | null;
  created_at: string;
  source: string;
  source_revision_config: { repo_ref?: string; repo_commit_sha?: string | null };
}
interface Transition {
  from_status: string | null;
  to_status: string;
  reason: string | null;
  at: string;
}

const TERMINAL = new Set(["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"]);
const STEPS = ["QUEUED", "BUILDING", "DEPLOYING", "DEPLOYED"];

export function DeploymentDetail({ id }: { id: string }) {
  const dep = useLoad(() => api<Deployment>(`/v2/deployments/${id}`), [id], 2000);
  const revs = useLoad(
    () => api<{ resources: Revision[] }>(`/v2/deployments/${id}/revisions?limit=50`).then((r) => r.resources),
    [id],
    2000,
  );
  const [selected, setSelected] = useState<string | null>(null);
  const [patching, setPatching] = useState(false);
  const action = useAction();
  const d = dep.data;
  const rev = revs.data?.find((r) => r.id === (selected ?? d?.latest_revision_id)) ?? revs.data?.[0];

  const remove = () =>
    void action.run(async () => {
      if (!confirm(`Delete deployment ${d?.name}? Its servers stop and its revisions are removed.`)) return;
      await api(`/v2/deployments/${id}`, { method: "DELETE" });
      go("deployments");
    });
  const rollback = (rid: string) =>
    void action.run(async () => {
      const r = await api<Revision>(`/v2/deployments/${id}/revisions/${rid}/redeploy`, { method: "POST", json: {} });
      setSelected(r.id);
      await revs.reload();
    });

  return (
    <Page
      title={d?.name ?? "Deployment"}
      actions={
        <>
          <a className="button primary" href={href("studio", id)}>
            Open in Studio
          </a>
          <a className="button" href={href("playground", id)}>
            Open playground
          </a>
          <button onClick={() => setPatching(!patching)}>{patching ? "Close" : "Update"}</button>
          <button className="danger" onClick={remove} disabled={action.busy}>
            Delete
          </button>
        </>
      }
    >
      <ErrorNote error={dep.error ?? action.error} />
      {d ? (
        <dl className="facts">
          <dt>Status</dt>
          <dd data-testid="deployment-status">
            <DeploymentStatus d={d} latest={revs.data?.find((r) => r.id === d.latest_revision_id) ?? null} />
          </dd>
          <dt>Source</dt>
          <dd>{sourceLabel(d.source, d.source_config.repo_url)}</dd>
          <dt>URL</dt>
          <dd>
            <code>{d.source_config.custom_url}</code>
          </dd>
          <dt>Secrets</dt>
          <dd>{d.secrets.length ? d.secrets.map((s) => s.name).join(", ") : "none"}</dd>
          <dt>Created</dt>
          <dd>
            <When iso={d.created_at} />
          </dd>
        </dl>
      ) : null}
      {patching && d ? (
        <PatchDeployment
          d={d}
          onDone={(rid) => {
            setPatching(false);
            setSelected(rid);
            void revs.reload();
          }}
        />
      ) : null}
      <div className="split">
        <div className="pane">
          <h2>Revisions</h2>
          <ul className="revisions">
            {revs.data?.map((r) => (
              <li key={r.id} className={r.id === rev?.id ? "selected" : ""}>
                <button className="link" onClick={() => setSelected(r.id)}>
                  <Status value={r.status} /> <span className="mono">{r.id.slice(-8)}</span>{" "}
                  <span className="muted">
                    <When iso={r.created_at} />
                  </span>
                  {r.id === d?.active_revision_id ? <span className="tag">live</span> : null}
                </button>
                {r.status === "DEPLOYED" && r.id !== d?.active_revision_id ? (
                  <button className="small" onClick={() => rollback(r.id)} disabled={action.busy}>
                    Roll back to this
                  </button>
                ) : null}
              </li>
            ))}
          </ul>
        </div>
        {rev ? <RevisionPanel deploymentId={id} rev={rev} /> : null}
      </div>
    </Page>
  );
}

function RevisionPanel({ deploymentId, rev }: { deploymentId: string; rev: Revision }) {
  const live = !TERMINAL.has(rev.status);
  const base = `/v2/deployments/${deploymentId}/revisions/${rev.id}`;
  const transitions = useLoad(() => api<Transition[]>(`${base}/transitions`), [base, rev.status], live ? 1500 : 0);
  const [kind, setKind] = useState<"build" | "deploy">("build");
  const reached = STEPS.findIndex((s) => rev.status.startsWith(s.replace(/ING$/, "")) || rev.status === s);
  const interrupt = () => void api(`${base}/interrupt`, { method: "POST", json: {} }).catch(() => undefined);
  return (
    <div className="pane grow">
      <h2>
        Revision <span className="mono">{rev.id.slice(-8)}</span>{" "}
        <span data-testid="revision-status">
          <Status value={rev.status} />
        </span>
      </h2>
      {rev.status_message ? <div className="error">{rev.status_message}</div> : null}
      {live ? (
        <div className="row center">
          <Progress fraction={reached < 0 ? null : (reached + 1) / STEPS.length} label={`${rev.status}…`} />
          <button className="small" onClick={interrupt}>
            Interrupt
          </button>
        </div>
      ) : null}
      <ol className="timeline">
        {transitions.data?.map((t, i) => (
          <li key={i}>
            <Status value={t.to_status} /> <span className="muted">{new Date(t.at).toLocaleTimeString()}</span>
            {t.reason ? <span className="reason"> — {t.reason}</span> : null}
          </li>
        ))}
      </ol>
      <div className="tabs">
        <button className={kind === "build" ? "on" : ""} onClick={() => setKind("build")}>
          Build log
        </button>
        <button className={kind === "deploy" ? "on" : ""} onClick={() => setKind("deploy")}>
          Deploy log
        </button>
      </div>
      <RevisionLogs base={base} kind={kind} live={live} />
    </div>
  );
}

function PatchDeployment({ d, onDone }: { d: Deployment; onDone: (revisionId: string) => void }) {
  const [source, setSource] = useState<SourceChoice>({ kind: "none" });
  const [secrets, setSecrets] = useState(d.secrets.map((s) => s.name).join("\n"));
  const [configPath, setConfigPath] = useState("langgraph.json");
  const [progress, setProgress] = useUploadProgress();
  const action = useAction();
  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    void action.run(async () => {
      const fields = await sourceFields(source, configPath, d.id, setProgress);
      const body: Record<string, unknown> = { secrets: parseSecrets(secrets) };
      if (fields.source_revision_config) body.source_revision_config = fields.source_revision_config;
      const updated = await api<Deployment>(`/v2/deployments/${d.id}`, { method: "PATCH", json: body });
      onDone(updated.latest_revision_id ?? "");
    });
  };
  return (
    <form className="card form" onSubmit={submit} aria-label="Update deployment">
      <SourcePicker value={source} onChange={setSource} allowNone lockedRepo={d.source_config.repo_url} />
      {source.kind !== "none" ? (
        <Field label="Config path">
          <input value={configPath} onChange={(e) => setConfigPath(e.target.value)} />
        </Field>
      ) : null}
      <Field
        label="Secrets"
        hint="NAME alone keeps the current value; NAME=value sets a new one; a removed line deletes it"
      >
        <textarea rows={3} value={secrets} onChange={(e) => setSecrets(e.target.value)} spellCheck={false} />
      </Field>
      <UploadProgress p={progress} />
      <ErrorNote error={action.error} />
      <button className="primary" type="submit" disabled={action.busy}>
        {action.busy ? "Updating…" : "Create revision"}
      </button>
    </form>
  );
}
