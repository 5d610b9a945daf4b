import { useState } from "react";
import { useStream } from "@langchain/langgraph-sdk/react";
import { api, sessionHeaders } from "../api.ts";
import { threadTitle } from "../decisions.ts";
import { go, href } from "../router.ts";
import { Empty, ErrorNote, Field, Page, Status, useLoad, When } from "../ui.tsx";
import type { Deployment } from "./Deployments.tsx";
import { AuthPicker } from "./AuthPicker.tsx";
import { deploymentUrl, useDeploymentClient, useDeploymentHeaders, type DeploymentAuth } from "./deployment-client.ts";

interface Assistant {
  assistant_id: string;
  graph_id: string;
  name?: string;
}
interface ThreadSummary {
  thread_id: string;
  updated_at: string;
  status: string;
  values?: { messages?: Array<{ content: unknown }> };
}
type Msg = {
  id?: string;
  type: string;
  content: unknown;
  name?: string;
  tool_calls?: Array<{ id?: string; name: string; args: unknown }>;
  tool_call_id?: string;
};

const text = (c: unknown) =>
  typeof c === "string"
    ? c
    : Array.isArray(c)
      ? c.map((p: { text?: string }) => p.text ?? "").join("")
      : JSON.stringify(c);

export default function Playground({ deploymentId, threadId }: { deploymentId?: string; threadId?: string }) {
  const deps = useLoad(
    () => api<{ resources: Deployment[] }>("/v2/deployments?limit=100").then((r) => r.resources),
    [],
  );
  const [auth, setAuth] = useState<DeploymentAuth>({ mode: "platform", token: "" });
  const { headers, error: tokenError } = useDeploymentHeaders(auth);
  const apiUrl = deploymentId ? deploymentUrl(deploymentId) : "";
  const client = useDeploymentClient(deploymentId, headers);
  const assistants = useLoad(
    async () => (client ? ((await client.assistants.search({ limit: 50 })) as Assistant[]) : []),
    [client],
  );
  const [assistantId, setAssistantId] = useState<string>("");
  const threads = useLoad(
    async () =>
      client
        ? ((await client.threads.search({ limit: 20, sortBy: "updated_at", sortOrder: "desc" })) as ThreadSummary[])
        : [],
    [client, threadId],
    0,
  );
  const chosen = assistantId || assistants.data?.[0]?.assistant_id || "";

  return (
    <Page title="Playground">
      <div className="row wrap">
        <Field label="Deployment">
          <select name="deployment" value={deploymentId ?? ""} onChange={(e) => go("playground", e.target.value)}>
            <option value="">Choose…</option>
            {deps.data?.map((d) => (
              <option key={d.id} value={d.id}>
                {d.name} ({d.status})
              </option>
            ))}
          </select>
        </Field>
        <Field label="Assistant">
          <select name="assistant" value={chosen} onChange={(e) => setAssistantId(e.target.value)}>
            {assistants.data?.map((a) => (
              <option key={a.assistant_id} value={a.assistant_id}>
                {a.name || a.graph_id}
              </option>
            ))}
          </select>
        </Field>
        <AuthPicker value={auth} onChange={setAuth} />
      </div>
      <ErrorNote error={deps.error ?? tokenError ?? assistants.error} />
      {!deploymentId ? <Empty>Choose a deployment to chat with one of its assistants.</Empty> : null}
      {deploymentId && auth.mode === "custom" && !auth.token ? (
        <Empty>Type the end user's token to talk to the deployment as them.</Empty>
      ) : null}
      {deploymentId ? (
        <p>
          <a href={href("studio", deploymentId, ...(threadId ? [threadId] : []))}>Open this deployment in the Studio</a>{" "}
          to see the graph, its state at every step and time travel.
        </p>
      ) : null}
      {deploymentId && headers && chosen ? (
        <div className="split">
          <aside className="pane threads">
            <h2>Threads</h2>
            <a className="button small" href={href("playground", deploymentId)}>
              New thread
            </a>
            <ul>
              {threads.data?.map((t) => (
                <li key={t.thread_id} className={t.thread_id === threadId ? "selected" : ""}>
                  <a href={href("playground", deploymentId, t.thread_id)}>
                    <span className="preview">{threadTitle(t.values)}</span> <Status value={t.status} />
                    <span className="muted small">
                      <When iso={t.updated_at} />
                    </span>
                  </a>
                </li>
              ))}
            </ul>
          </aside>
          <Chat
            key={`${chosen}:${threadId ?? "new"}:${auth.mode}`}
            apiUrl={apiUrl}
            headers={headers}
            assistantId={chosen}
            threadId={threadId ?? null}
            onThread={(id) => {
              void threads.reload();
              if (id !== threadId) history.replaceState(null, "", href("playground", deploymentId, id));
            }}
          />
        </div>
      ) : null}
    </Page>
  );
}

function Chat(props: {
  apiUrl: string;
  headers: Record<string, string>;
  assistantId: string;
  threadId: string | null;
  onThread: (id: string) => void;
}) {
  const [threadId, setThreadId] = useState<string | null>(props.threadId);
  const stream = useStream<{ messages: Msg[] }>({
    apiUrl: props.apiUrl,
    assistantId: props.assistantId,
    threadId,
    defaultHeaders: { ...props.headers, "x-wharf-csrf": sessionHeaders()["x-wharf-csrf"] },
    messagesKey: "messages",
    onFinish: () => {
      if (threadId) props.onThread(threadId);
    },
    onThreadId: (id) => {
      setThreadId(id);
      props.onThread(id);
    },
  });
  const [draft, setDraft] = useState("");
  const [resume, setResume] = useState("");
  const messages = stream.messages as unknown as Msg[];
  const results = new Map(messages.filter((m) => m.type === "tool").map((m) => [m.tool_call_id, m]));
  const send = (e: React.FormEvent) => {
    e.preventDefault();
    if (!draft.trim()) return;
    void stream.submit(
      { messages: [{ type: "human", content: draft }] } as never,
      { streamMode: ["values", "messages-tuple"] } as never,
    );
    setDraft("");
  };
  const answer = (value: unknown) => void stream.submit(undefined, { command: { resume: value } } as never);
  return (
    <div className="pane grow chat">
      <div className="messages" data-testid="messages">
        {messages.length === 0 ? <p className="muted">Say something to start a thread.</p> : null}
        {messages.map((m, i) =>
          m.type === "tool" ? null : (
            <div key={m.id ?? i} className={`msg ${m.type}`} data-type={m.type}>
              {text(m.content) ? <div className="bubble">{text(m.content)}</div> : null}
              {m.tool_calls?.map((tc) => (
                <details key={tc.id ?? tc.name} className="tool-call" open>
                  <summary>
                    Tool call: <strong>{tc.name}</strong>
                  </summary>
                  <pre>{JSON.stringify(tc.args, null, 2)}</pre>
                  {results.get(tc.id) ? (
                    <div className="tool-result" data-testid="tool-result">
                      → {text(results.get(tc.id)!.content)}
                    </div>
                  ) : (
                    <div className="muted">running…</div>
                  )}
                </details>
              ))}
            </div>
          ),
        )}
        {stream.isLoading ? <div className="muted typing">streaming…</div> : null}
      </div>
      {stream.interrupt ? (
        <form className="card interrupt" onSubmit={(e) => (e.preventDefault(), answer(tryJson(resume)), setResume(""))}>
          <strong>The run is waiting for you</strong>
          <pre>{JSON.stringify(stream.interrupt.value, null, 2)}</pre>
          <InterruptLink value={stream.interrupt.value} />
          <div className="row">
            <input
              name="resume"
              placeholder="Answer (text or JSON)"
              value={resume}
              onChange={(e) => setResume(e.target.value)}
            />
            <button className="primary" type="submit">
              Resume
            </button>
            <button type="button" onClick={() => answer(true)}>
              Approve
            </button>
          </div>
        </form>
      ) : null}
      <ErrorNote error={stream.error} />
      <form className="composer" onSubmit={send}>
        <label htmlFor="composer-message" className="sr-only">
          Message
        </label>
        <input
          id="composer-message"
          name="message"
          placeholder="Message the assistant…"
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          autoComplete="off"
        />
        {stream.isLoading ? (
          <button type="button" onClick={() => void stream.stop()}>
            Stop
          </button>
        ) : (
          <button className="primary" type="submit">
            Send
          </button>
        )}
      </form>
    </div>
  );
}

function tryJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

/** Wharf's connection interrupts carry an OAuth URL: offer it as a link. */
function InterruptLink({ value }: { value: unknown }) {
  const url = (value as { url?: unknown } | null)?.url;
  return typeof url === "string" && /^https?:\/\//.test(url) ? (
    <a href={url} target="_blank" rel="noreferrer">
      Open the connect page ↗
    </a>
  ) : null;
}
