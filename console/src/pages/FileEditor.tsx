import { useEffect, useState } from "react";
import { call, upload } from "../api.ts";
import { ErrorNote, useAction } from "../ui.tsx";

/** Larger files are downloaded rather than opened: a textarea is no place for megabytes. */
export const EDITABLE_MAX_BYTES = 1024 * 1024;

/**
 * A text file of the sandbox opened in the page (read with `/download`), edited and saved back
 * with `/upload`; `create` starts from an empty file.
 */
export function FileEditor(props: {
  dataplane: string;
  path: string;
  create: boolean;
  onClose: (saved: boolean) => void;
}) {
  const [text, setText] = useState<string | null>(props.create ? "" : null);
  const [dirty, setDirty] = useState(false);
  const load = useAction();
  const save = useAction();
  useEffect(() => {
    if (props.create) return;
    void load.run(async () => {
      const res = await call(`${props.dataplane}/download?path=${encodeURIComponent(props.path)}`);
      const blob = await res.blob();
      if (blob.size > EDITABLE_MAX_BYTES)
        throw new Error(`This file is ${Math.round(blob.size / 1024)} KiB: download it instead.`);
      const bytes = new Uint8Array(await blob.arrayBuffer());
      if (bytes.includes(0)) throw new Error("This looks like a binary file: download it instead.");
      setText(new TextDecoder().decode(bytes));
    });
  }, [props.dataplane, props.path, props.create]);
  const write = (e: React.FormEvent) => {
    e.preventDefault();
    void save.run(async () => {
      const form = new FormData();
      form.append("file", new Blob([text ?? ""], { type: "text/plain" }), props.path.split("/").pop()!);
      await upload(`${props.dataplane}/upload?path=${encodeURIComponent(props.path)}`, "POST", form, () => undefined);
      setDirty(false);
      props.onClose(true);
    });
  };
  return (
    <form className="card form file-editor" onSubmit={write} aria-label={`Edit ${props.path}`}>
      <div className="row center wrap">
        <strong className="mono grow-text">{props.path}</strong>
        <button className="primary" type="submit" disabled={save.busy || text === null}>
          {save.busy ? "Saving…" : props.create ? "Create file" : "Save"}
        </button>
        <button type="button" onClick={() => (!dirty || confirm("Discard your changes?")) && props.onClose(false)}>
          Close
        </button>
      </div>
      <ErrorNote error={load.error ?? save.error} />
      {text !== null ? (
        <label className="field">
          <span className="label">Contents</span>
          <textarea
            name="file_contents"
            rows={16}
            spellCheck={false}
            value={text}
            onChange={(e) => (setText(e.target.value), setDirty(true))}
          />
        </label>
      ) : load.busy ? (
        <p className="muted">Opening…</p>
      ) : null}
    </form>
  );
}
