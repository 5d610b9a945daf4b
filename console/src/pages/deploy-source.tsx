import { useState } from "react";
import { api, localPath, upload } from "../api.ts";
import { Field, Progress } from "../ui.tsx";

export type SourceChoice =
  { kind: "tarball"; file: File | null } | { kind: "git"; url: string; ref: string } | { kind: "none" };

/** Tarball upload or git URL, shared by create and PATCH. */
export function SourcePicker(props: {
  value: SourceChoice;
  onChange: (v: SourceChoice) => void;
  allowNone?: boolean;
  errors?: Record<string, string>;
  lockedRepo?: string;
}) {
  const v = props.value;
  // A deployment keeps its repository (as on LangSmith Deployment); only the ref changes.
  const locked = props.lockedRepo;
  return (
    <div className="source">
      <div className="segmented" role="radiogroup" aria-label="Source">
        {props.allowNone ? (
          <button
            type="button"
            className={v.kind === "none" ? "on" : ""}
            onClick={() => props.onChange({ kind: "none" })}
          >
            Keep source
          </button>
        ) : null}
        {locked ? null : (
          <button
            type="button"
            className={v.kind === "tarball" ? "on" : ""}
            onClick={() => props.onChange({ kind: "tarball", file: null })}
          >
            Upload .tar.gz
          </button>
        )}
        {props.allowNone && !locked ? null : (
          <button
            type="button"
            className={v.kind === "git" ? "on" : ""}
            onClick={() => props.onChange({ kind: "git", url: locked ?? "", ref: "main" })}
          >
            {locked ? "New git ref" : "Git URL"}
          </button>
        )}
      </div>
      {v.kind === "tarball" ? (
        <Field label="Project tarball" hint="A .tar.gz of a folder with langgraph.json" error={props.errors?.tarball}>
          <input
            name="tarball"
            type="file"
            accept=".tgz,.tar.gz,application/gzip"
            onChange={(e) => props.onChange({ kind: "tarball", file: e.target.files?.[0] ?? null })}
          />
        </Field>
      ) : null}
      {v.kind === "git" ? (
        <div className="row">
          <Field label="Repository URL" error={props.errors?.repo_url}>
            <input
              name="repo_url"
              placeholder="https://github.com/org/agent.git"
              value={v.url}
              readOnly={!!locked}
              onChange={(e) => props.onChange({ ...v, url: e.target.value })}
            />
          </Field>
          <Field label="Branch, tag or commit" error={props.errors?.repo_ref}>
            <input name="repo_ref" value={v.ref} onChange={(e) => props.onChange({ ...v, ref: e.target.value })} />
          </Field>
        </div>
      ) : null}
    </div>
  );
}

/** Uploads the tarball if there is one (with progress) and returns the API's source fields. */
export async function sourceFields(
  choice: SourceChoice,
  configPath: string,
  deploymentId: string | null,
  onProgress: (p: { fraction: number | null; label: string } | null) => void,
): Promise<Record<string, unknown>> {
  if (choice.kind === "none") return {};
  if (choice.kind === "git") {
    return {
      source: "github",
      source_config: { repo_url: choice.url.trim() },
      source_revision_config: { repo_ref: choice.ref.trim() || "main", langgraph_config_path: configPath },
    };
  }
  if (!choice.file) throw new Error("Choose a .tar.gz file to upload");
  const where = deploymentId ? `/v2/deployments/${deploymentId}/upload-url` : "/v2/deployments/upload-url";
  const target = await api<{ upload_url: string; object_path: string }>(where, { method: "POST", json: {} });
  onProgress({ fraction: 0, label: "Uploading…" });
  await upload(
    localPath(target.upload_url),
    "PUT",
    choice.file,
    (f) => onProgress({ fraction: f, label: `Uploading ${Math.round(f * 100)}%` }),
    { "content-type": "application/gzip" },
  );
  onProgress(null);
  return {
    source: "internal_source",
    source_config: {},
    source_revision_config: { source_tarball_path: target.object_path, langgraph_config_path: configPath },
  };
}

export function UploadProgress({ p }: { p: { fraction: number | null; label: string } | null }) {
  return p ? <Progress fraction={p.fraction} label={p.label} /> : null;
}

export function useUploadProgress() {
  return useState<{ fraction: number | null; label: string } | null>(null);
}

export { parseSecrets } from "../decisions.ts";
