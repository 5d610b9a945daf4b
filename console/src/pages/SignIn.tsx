import { useState } from "react";
import { ErrorNote, Field } from "../ui.tsx";
import type { Session } from "../App.tsx";

/** Exchanges an API key or bearer token for the session cookie; the credential is not kept. */
export function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [credential, setCredential] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const value = credential.trim();
    // API keys start with wharf_; anything else is a bearer token from POST /v2/tokens.
    const body = value.startsWith("wharf_") ? { api_key: value } : { token: value.replace(/^bearer\s+/i, "") };
    try {
      const res = await fetch("/console/api/session", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        credentials: "same-origin",
      });
      const json = (await res.json()) as Session & { detail?: unknown };
      if (!res.ok) throw new Error(typeof json.detail === "string" ? json.detail : "Sign-in failed");
      setCredential("");
      onSignedIn(json);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main className="signin">
      <form onSubmit={submit} className="card">
        <h1>Wharf</h1>
        <p className="muted">
          Sign in with an API key or a bearer token. It is exchanged for a session cookie and not stored in the browser.
        </p>
        <Field
          label="API key or bearer token"
          hint="npm start prints the bootstrap key; it is also in .wharf/bootstrap-key"
        >
          <input
            name="credential"
            type="password"
            autoComplete="off"
            autoFocus
            value={credential}
            onChange={(e) => setCredential(e.target.value)}
          />
        </Field>
        <ErrorNote error={error} />
        <button type="submit" className="primary" disabled={busy || !credential.trim()}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
