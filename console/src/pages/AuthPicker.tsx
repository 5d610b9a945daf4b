import { useState } from "react";
import { Field } from "../ui.tsx";
import { bareToken, type DeploymentAuth } from "./deployment-client.ts";

/** Who the playground and the Studio talk to a deployment as: the developer, or an end user by token. */
export function AuthPicker({ value, onChange }: { value: DeploymentAuth; onChange: (a: DeploymentAuth) => void }) {
  const [typed, setTyped] = useState(value.token);
  const [shown, setShown] = useState(false);
  const commit = () => onChange({ mode: "custom", token: bareToken(typed) });
  return (
    <>
      <Field label="Authenticate as">
        <select
          name="auth_mode"
          value={value.mode}
          onChange={(e) => onChange({ ...value, mode: e.target.value as DeploymentAuth["mode"] })}
        >
          <option value="platform">Me (developer)</option>
          <option value="custom">An end user</option>
        </select>
      </Field>
      {value.mode === "custom" ? (
        <Field label="End user's token" hint="Sent as Authorization: Bearer <token> to the project's auth handler">
          <span className="token-input">
            <input
              name="auth_token"
              type={shown ? "text" : "password"}
              autoComplete="off"
              spellCheck={false}
              value={typed}
              onChange={(e) => setTyped(e.target.value)}
              onBlur={commit}
              onKeyDown={(e) => e.key === "Enter" && commit()}
            />
            <button type="button" className="small" aria-pressed={shown} onClick={() => setShown(!shown)}>
              {shown ? "Hide" : "Show"}
            </button>
          </span>
        </Field>
      ) : null}
    </>
  );
}
