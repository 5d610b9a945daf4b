import { useState } from "react";
import { issuesAt } from "../ui.tsx";
import {
  FORM_PATHS,
  humanMessage,
  humanPath,
  listItemAdvice,
  messagesAt,
  type HeaderValue,
  type ProxyConfig,
  type Rule,
} from "../decisions.ts";

export { cleanProxyConfig, type ProxyConfig } from "../decisions.ts";

const lines = (v: string) =>
  v
    .split("\n")
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * A form for header rules, access control and no_proxy (other rule kinds and callbacks are kept as
 * they are and editable as JSON). The API's 422 `loc`s under `body.proxy_config` appear beside the
 * input they name; anything else is listed below with its path.
 */
export function ProxyConfigEditor(props: {
  value: ProxyConfig;
  onChange: (v: ProxyConfig) => void;
  error: unknown;
  prefix?: Array<string | number>;
}) {
  const [mode, setMode] = useState<"form" | "json">("form");
  const [jsonText, setJsonText] = useState("");
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [advice, setAdvice] = useState<string | null>(null);
  const issues = issuesAt(props.error, props.prefix ?? ["body", "proxy_config"]);
  const at = (path: string) => messagesAt(issues, path);
  const pc = props.value;
  const rules = pc.rules ?? [];
  const set = (patch: Partial<ProxyConfig>) => props.onChange({ ...pc, ...patch });
  const setRule = (i: number, r: Rule) => set({ rules: rules.map((x, k) => (k === i ? r : x)) });
  const mode_ = pc.access_control?.allow_list ? "allow" : pc.access_control?.deny_list ? "deny" : "none";
  const listText = (pc.access_control?.allow_list ?? pc.access_control?.deny_list ?? []).join("\n");
  const others = mode === "form" ? issues.filter((i) => !FORM_PATHS.test(i.path)) : issues;

  const toJson = () => {
    setJsonText(JSON.stringify(pc, null, 2));
    setJsonError(null);
    setMode("json");
  };
  const fromJson = (text: string) => {
    setJsonText(text);
    try {
      const parsed = text.trim() ? (JSON.parse(text) as ProxyConfig) : {};
      setJsonError(null);
      props.onChange(parsed);
    } catch (e) {
      setJsonError((e as Error).message);
    }
  };

  return (
    <div className="proxy-editor">
      <div className="segmented">
        <button
          type="button"
          className={mode === "form" ? "on" : ""}
          onClick={() => setMode("form")}
          disabled={!!jsonError}
        >
          Form
        </button>
        <button type="button" className={mode === "json" ? "on" : ""} onClick={toJson}>
          JSON
        </button>
      </div>
      {mode === "json" ? (
        <label className={`field${jsonError || issues.length ? " invalid" : ""}`}>
          <span className="label">proxy_config</span>
          <textarea
            name="proxy_config_json"
            rows={12}
            spellCheck={false}
            value={jsonText}
            onChange={(e) => fromJson(e.target.value)}
            className="mono"
          />
          {jsonError ? <span className="field-error">{jsonError}</span> : null}
        </label>
      ) : (
        <>
          <h3>
            Header rules <span className="muted">(first match wins)</span>
          </h3>
          {rules.map((r, i) =>
            r.type && r.type !== "header" ? (
              <div key={i} className="rule card inset">
                <strong>{r.name ?? r.type}</strong> <span className="tag">{r.type}</span>{" "}
                <span className="muted">edit as JSON</span>
                <button type="button" className="small" onClick={() => set({ rules: rules.filter((_, k) => k !== i) })}>
                  Remove
                </button>
                {at(`rules.${i}`) ? <span className="field-error">{at(`rules.${i}`)}</span> : null}
              </div>
            ) : (
              <RuleForm
                key={i}
                rule={r}
                at={(p) => at(`rules.${i}${p ? "." + p : ""}`)}
                onChange={(x) => setRule(i, x)}
                onRemove={() => set({ rules: rules.filter((_, k) => k !== i) })}
              />
            ),
          )}
          <button
            type="button"
            className="small"
            onClick={() =>
              set({
                rules: [
                  ...rules,
                  {
                    name: `rule-${rules.length + 1}`,
                    match_hosts: [],
                    headers: [{ name: "", type: "plaintext", value: "" }],
                  },
                ],
              })
            }
          >
            Add header rule
          </button>
          <h3>Access control</h3>
          <div className="row">
            <label className="field">
              <span className="label">Mode</span>
              <select
                name="access_mode"
                value={mode_}
                onChange={(e) => {
                  const items = lines(listText);
                  set({
                    access_control:
                      e.target.value === "allow"
                        ? { allow_list: items }
                        : e.target.value === "deny"
                          ? { deny_list: items }
                          : null,
                  });
                }}
              >
                <option value="none">Default (HTTP/HTTPS anywhere)</option>
                <option value="allow">Allow list (deny the rest)</option>
                <option value="deny">Deny list</option>
              </select>
            </label>
            {mode_ !== "none" ? (
              <label className={`field${at(`access_control`) || advice ? " invalid" : ""}`}>
                <span className="label">
                  {mode_ === "allow" ? "Allowed" : "Denied"} destinations, one pattern per line
                </span>
                <textarea
                  name="access_list"
                  rows={3}
                  spellCheck={false}
                  defaultValue={listText}
                  onChange={(e) =>
                    setAdvice(lines(e.target.value).map(listItemAdvice).filter(Boolean).join("; ") || null)
                  }
                  onBlur={(e) =>
                    set({ access_control: { [mode_ === "allow" ? "allow_list" : "deny_list"]: lines(e.target.value) } })
                  }
                />
                {advice || at("access_control") ? (
                  <span className="field-error">{advice ?? at("access_control")}</span>
                ) : (
                  <span className="hint">
                    A host (api.example.com), a wildcard (*.example.com), host:port, an IP address or a CIDR
                    (10.0.0.0/8): not a URL
                  </span>
                )}
              </label>
            ) : null}
          </div>
          <label className={`field${at("no_proxy") ? " invalid" : ""}`}>
            <span className="label">no_proxy: hosts that bypass the proxy, one per line</span>
            <textarea
              name="no_proxy"
              rows={2}
              spellCheck={false}
              defaultValue={(pc.no_proxy ?? []).join("\n")}
              onBlur={(e) => set({ no_proxy: lines(e.target.value) })}
            />
            {at("no_proxy") ? <span className="field-error">{at("no_proxy")}</span> : null}
          </label>
        </>
      )}
      {others.length ? (
        <ul className="issues" role="alert">
          {others.map((i, k) => (
            <li key={k}>
              {i.path ? `${humanPath(i.path)}: ` : ""}
              {humanMessage(i.msg)}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

function RuleForm(props: {
  rule: Rule;
  at: (path: string) => string | null;
  onChange: (r: Rule) => void;
  onRemove: () => void;
}) {
  const { rule: r, at } = props;
  const headers = r.headers ?? [];
  const setHeader = (j: number, h: HeaderValue) =>
    props.onChange({ ...r, headers: headers.map((x, k) => (k === j ? h : x)) });
  const err = (p: string) => (at(p) ? <span className="field-error">{at(p)}</span> : null);
  // Only problems of the list itself (e.g. empty): its items' problems show at their inputs.
  const listError = at("headers")
    ?.split("; ")
    .filter((m) => !/^Item \d+/.test(m))
    .join("; ");
  return (
    <fieldset className="rule card inset" data-rule={r.name}>
      <div className="row">
        <label className={`field${at("name") ? " invalid" : ""}`}>
          <span className="label">Rule name</span>
          <input
            name="rule_name"
            value={r.name ?? ""}
            onChange={(e) => props.onChange({ ...r, name: e.target.value })}
          />
          {err("name")}
        </label>
        <label className={`field${at("match_hosts") ? " invalid" : ""}`}>
          <span className="label">match_hosts (comma-separated)</span>
          <input
            name="match_hosts"
            value={(r.match_hosts ?? []).join(", ")}
            onChange={(e) =>
              props.onChange({
                ...r,
                match_hosts: e.target.value
                  .split(",")
                  .map((s) => s.trim())
                  .filter(Boolean),
              })
            }
          />
          {err("match_hosts")}
        </label>
        <label className={`field${at("match_paths") ? " invalid" : ""}`}>
          <span className="label">match_paths</span>
          <input
            name="match_paths"
            placeholder="all paths"
            value={(r.match_paths ?? []).join(", ")}
            onChange={(e) =>
              props.onChange({
                ...r,
                match_paths: e.target.value
                  .split(",")
                  .map((s) => s.trim())
                  .filter(Boolean),
              })
            }
          />
          {err("match_paths")}
        </label>
      </div>
      {headers.map((h, j) => (
        <div className="row header-row" key={j}>
          <label className={`field${at(`headers.${j}.name`) ? " invalid" : ""}`}>
            <span className="label">Header</span>
            <input name="header_name" value={h.name} onChange={(e) => setHeader(j, { ...h, name: e.target.value })} />
            {err(`headers.${j}.name`)}
          </label>
          <label className={`field${at(`headers.${j}.type`) ? " invalid" : ""}`}>
            <span className="label">Type</span>
            <select
              name="header_type"
              value={h.type}
              onChange={(e) => setHeader(j, { ...h, type: e.target.value as HeaderValue["type"] })}
            >
              <option value="plaintext">plaintext</option>
              <option value="opaque">opaque (write-only)</option>
              <option value="workspace_secret">workspace_secret ({"{KEY}"})</option>
            </select>
            {err(`headers.${j}.type`)}
          </label>
          <label className={`field${at(`headers.${j}.value`) ? " invalid" : ""}`}>
            <span className="label">Value</span>
            <input
              name="header_value"
              type={h.type === "opaque" ? "password" : "text"}
              autoComplete="off"
              placeholder={
                h.is_set
                  ? "set (write-only): type a new value"
                  : h.type === "workspace_secret"
                    ? "Bearer {MY_SECRET}"
                    : ""
              }
              value={h.value ?? ""}
              onChange={(e) => setHeader(j, { ...h, value: e.target.value, is_set: undefined })}
            />
            {err(`headers.${j}.value`)}
          </label>
          <button
            type="button"
            className="small"
            aria-label="Remove header"
            onClick={() => props.onChange({ ...r, headers: headers.filter((_, k) => k !== j) })}
          >
            ✕
          </button>
        </div>
      ))}
      {listError ? <span className="field-error">{listError}</span> : null}
      <div className="row">
        <button
          type="button"
          className="small"
          onClick={() => props.onChange({ ...r, headers: [...headers, { name: "", type: "plaintext", value: "" }] })}
        >
          Add header
        </button>
        <button type="button" className="small danger" onClick={props.onRemove}>
          Remove rule
        </button>
      </div>
    </fieldset>
  );
}
