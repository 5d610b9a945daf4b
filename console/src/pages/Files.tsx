import { useRef, useState } from "react";
import { api, call, upload } from "../api.ts";
import { ErrorNote, Progress, useAction, useLoad, When } from "../ui.tsx";
import { parseListing } from "../decisions.ts";
import { FileEditor } from "./FileEditor.tsx";

const join = (dir: string, name: string) => (dir.endsWith("/") ? dir + name : `${dir}/${name}`);
const human = (n: number) =>
  n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`;

/** A file browser over the data plane: listing runs `find` in the sandbox; files move by upload/download. */
export function Files({ dataplane }: { dataplane: string }) {
  const [dir, setDir] = useState("/home/user");
  const [progress, setProgress] = useState<number | null>(null);
  const input = useRef<HTMLInputElement>(null);
  const [editing, setEditing] = useState<{ path: string; create: boolean } | null>(null);
  const act = useAction();
  const list = useLoad(async () => {
    const r = await api<{ stdout: string; stderr: string; exit_code: number }>(`${dataplane}/execute`, {
      method: "POST",
      json: { command: "find . -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%T@\\t%P\\n'", cwd: dir, timeout: 20 },
    });
    if (r.exit_code !== 0) throw new Error(r.stderr.trim() || `cannot list ${dir}`);
    return parseListing(r.stdout);
  }, [dataplane, dir]);

  const send = (files: FileList | null) =>
    void act
      .run(async () => {
        for (const file of Array.from(files ?? [])) {
          const form = new FormData();
          form.append("file", file, file.name);
          setProgress(0);
          await upload(
            `${dataplane}/upload?path=${encodeURIComponent(join(dir, file.name))}`,
            "POST",
            form,
            setProgress,
          );
        }
        setProgress(null);
        if (input.current) input.current.value = "";
        await list.reload();
      })
      .finally(() => setProgress(null));

  const download = (name: string) =>
    void act.run(async () => {
      const res = await call(`${dataplane}/download?path=${encodeURIComponent(join(dir, name))}`);
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement("a");
      a.href = url;
      a.download = name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });

  const newFile = () => {
    const name = prompt("Name of the new file (in this folder):")?.trim();
    if (name) setEditing({ path: join(dir, name), create: true });
  };
  const crumbs = dir.split("/").filter(Boolean);
  return (
    <div className="files">
      <div className="row center wrap">
        <nav className="crumbs" aria-label="Path">
          <button className="link" onClick={() => setDir("/")}>
            /
          </button>
          {crumbs.map((c, i) => (
            <span key={i}>
              <button className="link" onClick={() => setDir("/" + crumbs.slice(0, i + 1).join("/"))}>
                {c}
              </button>
              /
            </span>
          ))}
        </nav>
        <button className="primary" type="button" onClick={() => input.current?.click()}>
          Upload files
        </button>
        <input
          ref={input}
          type="file"
          name="upload"
          multiple
          hidden
          tabIndex={-1}
          aria-hidden="true"
          onChange={(e) => send(e.target.files)}
        />
        <button type="button" onClick={newFile}>
          New file
        </button>
        <button onClick={() => void list.reload()}>Refresh</button>
      </div>
      {progress !== null ? <Progress fraction={progress} label={`Uploading ${Math.round(progress * 100)}%`} /> : null}
      <ErrorNote error={list.error ?? act.error} />
      {editing ? (
        <FileEditor
          key={editing.path}
          dataplane={dataplane}
          path={editing.path}
          create={editing.create}
          onClose={(saved) => (setEditing(null), saved && void list.reload())}
        />
      ) : null}
      <table className="list">
        <thead>
          <tr>
            <th>Name</th>
            <th>Size</th>
            <th className="wide">Modified</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {dir !== "/" ? (
            <tr>
              <td colSpan={4}>
                <button className="link" onClick={() => setDir(dir.replace(/\/[^/]+\/?$/, "") || "/")}>
                  .. (up)
                </button>
              </td>
            </tr>
          ) : null}
          {list.data?.map((e) => (
            <tr key={e.name} data-file={e.name}>
              <td>
                {e.kind === "d" ? (
                  <button className="link" onClick={() => setDir(join(dir, e.name))}>
                    <span className="folder" aria-hidden="true" />
                    {e.name}/
                  </button>
                ) : (
                  <button className="link" onClick={() => setEditing({ path: join(dir, e.name), create: false })}>
                    {e.name}
                  </button>
                )}
              </td>
              <td>{e.kind === "d" ? "" : human(e.size)}</td>
              <td className="wide">
                <When iso={new Date(e.mtime * 1000).toISOString()} />
              </td>
              <td>
                {e.kind === "f" ? (
                  <button className="small" onClick={() => download(e.name)}>
                    Download
                  </button>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.length === 0 ? <p className="muted">Empty folder.</p> : null}
    </div>
  );
}
