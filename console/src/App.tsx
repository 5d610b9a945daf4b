import { lazy, Suspense, useCallback, useEffect, useState } from "react";
import { api, configureApi, setTenant } from "./api.ts";
import { href, useRoute } from "./router.ts";
import { Deployments } from "./pages/Deployments.tsx";
import { DeploymentDetail } from "./pages/DeploymentDetail.tsx";
import { Sandboxes } from "./pages/Sandboxes.tsx";
import { SandboxDetail } from "./pages/SandboxDetail.tsx";
import { Settings } from "./pages/Settings.tsx";
import { Connections } from "./pages/Connections.tsx";
import { SignIn } from "./pages/SignIn.tsx";

// The chat client and its dependencies load only when the playground opens.
const Playground = lazy(() => import("./pages/Playground.tsx"));
// The Studio (graph drawing and layout) likewise.
const Studio = lazy(() => import("./pages/studio/Studio.tsx"));

export interface Session {
  /** `wharf dev` answers `{"local": true}`: its console is the Studio of that one project. */
  local?: boolean;
  user_id: string;
  workspace_id: string;
  csrf_token: string;
  expires_at: string;
}
interface Workspace {
  id: string;
  name: string;
}

const TENANT_KEY = "wharf.console.workspace";

const NAV: Array<[string, string]> = [
  ["deployments", "Deployments"],
  ["playground", "Playground"],
  ["studio", "Studio"],
  ["sandboxes", "Sandboxes"],
  ["connections", "Connections"],
  ["settings", "Secrets & keys"],
];

export function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [workspaces, setWorkspaces] = useState<Workspace[]>([]);
  const [tenant, setTenantState] = useState<string | null>(null);
  const [menu, setMenu] = useState(false);
  const route = useRoute();

  const adopt = useCallback((s: Session | null) => {
    if (s && !s.local) {
      const saved = sessionStorage.getItem(TENANT_KEY);
      configureApi({ csrf: s.csrf_token, tenant: saved, onSignedOut: () => setSession(null) });
      setTenantState(saved);
    }
    setSession(s);
  }, []);

  useEffect(() => {
    fetch("/console/api/session", { credentials: "same-origin" })
      .then((r) => (r.status === 200 ? (r.json() as Promise<Session>) : null))
      .then(adopt, () => adopt(null));
  }, [adopt]);

  useEffect(() => {
    if (session && !session.local) api<Workspace[]>("/v2/workspaces").then(setWorkspaces, () => setWorkspaces([]));
  }, [session]);

  useEffect(() => setMenu(false), [route.join("/")]);

  if (session === undefined) return <div className="boot">Loading…</div>;
  if (session === null) return <SignIn onSignedIn={adopt} />;
  if (session.local) return <LocalStudio threadId={route[0] === "studio" ? route[2] : undefined} />;

  const switchTo = (id: string) => {
    const next = id === session.workspace_id ? null : id;
    if (next) sessionStorage.setItem(TENANT_KEY, next);
    else sessionStorage.removeItem(TENANT_KEY);
    setTenant(next);
    setTenantState(next);
  };
  const signOut = async () => {
    await api("/console/api/session", { method: "DELETE" }).catch(() => undefined);
    sessionStorage.removeItem(TENANT_KEY);
    setSession(null);
  };

  const [section = "deployments", id, ...rest] = route;
  const active = tenant ?? session.workspace_id;
  return (
    <div className="shell">
      <header className="topbar">
        <button className="menu-toggle" aria-label="Menu" onClick={() => setMenu(!menu)}>
          ☰
        </button>
        <a className="brand" href={href("deployments")}>
          Wharf
        </a>
        <select aria-label="Workspace" className="workspace" value={active} onChange={(e) => switchTo(e.target.value)}>
          {workspaces.length === 0 ? <option value={active}>{active.slice(0, 8)}</option> : null}
          {workspaces.map((w) => (
            <option key={w.id} value={w.id}>
              {w.name}
            </option>
          ))}
        </select>
        <button className="ghost" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <nav className={`sidebar${menu ? " open" : ""}`}>
        {NAV.map(([key, label]) => (
          <a key={key} href={href(key)} className={section === key ? "active" : ""} onClick={() => setMenu(false)}>
            {label}
          </a>
        ))}
        <a href="/docs" target="_blank" rel="noreferrer">
          API docs ↗
        </a>
      </nav>
      <main key={active}>
        <Suspense fallback={<div className="boot">Loading…</div>}>
          {section === "deployments" && !id ? <Deployments /> : null}
          {section === "deployments" && id ? <DeploymentDetail id={id} /> : null}
          {section === "playground" ? <Playground deploymentId={id} threadId={rest[0]} /> : null}
          {section === "studio" ? <Studio deploymentId={id} threadId={rest[0]} /> : null}
          {section === "sandboxes" && !id ? <Sandboxes /> : null}
          {section === "sandboxes" && id ? <SandboxDetail name={id} tab={rest[0] ?? "terminal"} /> : null}
          {section === "connections" ? <Connections /> : null}
          {section === "settings" ? <Settings /> : null}
        </Suspense>
      </main>
    </div>
  );
}

/** The console that `wharf dev` serves: the Studio of the project it runs, on the same origin. */
function LocalStudio({ threadId }: { threadId?: string }) {
  return (
    <div className="shell local">
      <header className="topbar">
        <span className="brand">Wharf dev</span>
        <a className="ghost-link" href="/docs" target="_blank" rel="noreferrer">
          API docs ↗
        </a>
      </header>
      <main>
        <Suspense fallback={<div className="boot">Loading…</div>}>
          <Studio local deploymentId="local" threadId={threadId} />
        </Suspense>
      </main>
    </div>
  );
}
