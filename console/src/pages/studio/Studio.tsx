import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Client } from "@langchain/langgraph-sdk";
import { api } from "../../api.ts";
import { threadTitle } from "../../decisions.ts";
import { go } from "../../router.ts";
import { Empty, ErrorNote, Field, Page, useAction, useLoad } from "../../ui.tsx";
import type { Deployment } from "../Deployments.tsx";
import { AuthPicker } from "../AuthPicker.tsx";
import { useDeploymentClient, useDeploymentHeaders, type DeploymentAuth } from "../deployment-client.ts";
import { AssistantPane, type AssistantLike } from "./AssistantPane.tsx";
import { GraphView } from "./GraphView.tsx";
import { runningNodes, subgraphsOf, taskEvent, visibleId, type GraphJson } from "./graph-model.ts";
import { InterruptPane } from "./InterruptPane.tsx";
import { StepsPane } from "./StepsPane.tsx";
import { parseObject, schemaFields, skeletonFor, stepsOf, type Step, type ThreadStateLike } from "./steps.ts";

/**
 * A Studio for a deployment's graphs, as LangGraph Studio does it: the graph, a run streamed with
 * its running node highlighted, every checkpoint's state and writes, state editing and forks,
 * replays, interrupts resumed with a value or a Command, and the assistant's settings.
 */
export default function Studio({
  deploymentId,
  threadId,
  local = false,
}: {
  deploymentId?: string;
  threadId?: string;
  local?: boolean;
}) {
  const deps = useLoad(
    async () => (local ? [] : (await api<{ resources: Deployment[] }>("/v2/deployments?limit=100")).resources),
    [local],
  );
  const [auth, setAuth] = useState<DeploymentAuth>({ mode: local ? "custom" : "platform", token: "" });
  const { headers, error: tokenError } = useDeploymentHeaders(auth);
  const remote = useDeploymentClient(local ? undefined : deploymentId, headers);
  // `wharf dev`: the agent server is this page's own origin, open on loopback.
  const localClient = useMemo(() => (local ? new Client({ apiUrl: location.origin }) : null), [local]);
  const client = localClient ?? remote;
  const assistants = useLoad(
    async () => (client ? ((await client.assistants.search({ limit: 50 })) as AssistantLike[]) : []),
    [client],
  );
  const [assistantId, setAssistantId] = useState("");
  const assistant = assistants.data?.find((a) => a.assistant_id === assistantId) ?? assistants.data?.[0];
  const threads = useLoad(
    async () => (client ? await client.threads.search({ limit: 20, sortBy: "updated_at", sortOrder: "desc" }) : []),
    [client, threadId],
  );
  // Kept here, above the per-thread workbench, so that opening another thread keeps subgraphs as they were.
  const [expanded, setExpanded] = useState<Set<string>>(new Set());

  return (
    <Page title="Studio">
      <div className="row wrap">
        {local ? null : (
          <Field label="Deployment">
            <select name="deployment" value={deploymentId ?? ""} onChange={(e) => go("studio", e.target.value)}>
              <option value="">Choose…</option>
              {deps.data?.map((d) => (
                <option key={d.id} value={d.id}>
                  {d.name}
                </option>
              ))}
            </select>
          </Field>
        )}
        <Field label="Assistant">
          <select
            name="assistant"
            value={assistant?.assistant_id ?? ""}
            onChange={(e) => setAssistantId(e.target.value)}
          >
            {assistants.data?.map((a) => (
              <option key={a.assistant_id} value={a.assistant_id}>
                {a.name || a.graph_id}
              </option>
            ))}
          </select>
        </Field>
        {deploymentId ? (
          <Field label="Thread">
            <select
              name="thread"
              value={threadId ?? ""}
              onChange={(e) => go("studio", deploymentId, ...(e.target.value ? [e.target.value] : []))}
            >
              <option value="">New thread</option>
              {threads.data?.map((t) => (
                <option key={t.thread_id} value={t.thread_id}>
                  {threadTitle(t.values, t.created_at)}
                </option>
              ))}
            </select>
          </Field>
        ) : null}
        {local ? null : <AuthPicker value={auth} onChange={setAuth} />}
      </div>
      <ErrorNote error={deps.error ?? tokenError ?? assistants.error} />
      {!deploymentId ? (
        <Empty>Choose a deployment to see its graphs, run them and travel through their threads' checkpoints.</Empty>
      ) : null}
      {client && assistant && deploymentId ? (
        <Workbench
          key={`${assistant.assistant_id}:${threadId ?? "new"}`}
          expanded={expanded}
          setExpanded={setExpanded}
          client={client}
          assistant={assistant}
          deploymentId={deploymentId}
          threadId={threadId ?? null}
          onAssistantSaved={() => void assistants.reload()}
          onThreads={() => void threads.reload()}
        />
      ) : null}
    </Page>
  );
}

type CommandLike = { resume?: unknown; update?: unknown; goto?: unknown };

function Workbench(props: {
  expanded: Set<string>;
  setExpanded: (f: (prev: Set<string>) => Set<string>) => void;
  client: Client;
  assistant: AssistantLike;
  deploymentId: string;
  threadId: string | null;
  onAssistantSaved: () => void;
  onThreads: () => void;
}) {
  const { client, assistant } = props;
  const [threadId, setThreadId] = useState(props.threadId);
  const graph = useLoad(
    () => client.assistants.getGraph(assistant.assistant_id, { xray: true }) as unknown as Promise<GraphJson>,
    [client, assistant.assistant_id, assistant.version],
  );
  const schemas = useLoad(() => client.assistants.getSchemas(assistant.assistant_id), [client, assistant.assistant_id]);
  const history = useLoad(
    async () =>
      threadId ? ((await client.threads.getHistory(threadId, { limit: 200 })) as unknown as ThreadStateLike[]) : [],
    [client, threadId],
  );
  const steps = useMemo(() => stepsOf(history.data ?? []), [history.data]);
  const [selected, setSelected] = useState<string | null>(null);
  const { expanded, setExpanded } = props;
  const [running, setRunning] = useState<Map<string, string>>(new Map());
  const [visited, setVisited] = useState<Set<string>>(new Set());
  const [input, setInput] = useState<string | null>(null);
  const [inputError, setInputError] = useState<string | null>(null);
  const [tab, setTab] = useState<"run" | "assistant">("run");
  const action = useAction();
  const abort = useRef<AbortController | null>(null);
  useEffect(() => () => abort.current?.abort(), []);

  const subgraphs = useMemo(() => new Set(graph.data ? subgraphsOf(graph.data) : []), [graph.data]);
  const latest = history.data?.[0];
  const interrupts = latest ? stepsOf([latest])[0].interrupts : [];
  const toggle = (id: string) =>
    setExpanded((prev) => {
      const next = new Set(prev);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });

  /** One streamed run; tasks starting and ending move the highlight. */
  const stream = useCallback(
    (body: { input?: unknown; command?: CommandLike; checkpointId?: string }) =>
      void action.run(async () => {
        let thread = threadId;
        const fresh = !thread;
        if (!thread) {
          thread = (await client.threads.create()).thread_id;
          setThreadId(thread);
        }
        abort.current?.abort();
        const ctrl = (abort.current = new AbortController());
        setRunning(new Map());
        setVisited(new Set());
        const live = new Map<string, string>();
        const seen = new Set<string>();
        try {
          for await (const chunk of client.runs.stream(thread, assistant.assistant_id, {
            input: body.input ?? null,
            command: body.command,
            checkpoint: body.checkpointId ? { checkpoint_id: body.checkpointId, checkpoint_ns: "" } : undefined,
            streamMode: ["tasks", "values"],
            streamSubgraphs: true,
            signal: ctrl.signal,
          } as never)) {
            const ev = taskEvent(chunk.event as string, chunk.data);
            if (ev) {
              if (ev.phase === "start") live.set(ev.id, ev.path);
              else live.delete(ev.id);
              seen.add(ev.path);
              setRunning(new Map(live));
              setVisited(new Set(seen));
            }
            if (chunk.event === "error") throw new Error(describeError(chunk.data));
          }
        } finally {
          setRunning(new Map());
          setSelected(null);
          await history.reload();
          props.onThreads();
          // The page's address names the thread once its first run is over (a remount mid-run would cut the stream).
          if (fresh) go("studio", props.deploymentId, thread);
        }
      }),
    [client, assistant.assistant_id, threadId, action, history, props],
  );

  const run = (e: React.FormEvent) => {
    e.preventDefault();
    const parsed = parseObject(input ?? JSON.stringify(skeletonFor(schemas.data?.input_schema), null, 2), "The input");
    if (!parsed.ok) return setInputError(parsed.error);
    setInputError(null);
    stream({ input: parsed.value });
  };
  const replay = (step: Step) => stream({ checkpointId: step.checkpointId });
  const fork = (step: Step, values: Record<string, unknown>) =>
    void action.run(async () => {
      const saved = (await client.threads.updateState(threadId!, { values, checkpointId: step.checkpointId })) as {
        checkpoint?: { checkpoint_id?: string };
        configurable?: { checkpoint_id?: string };
      };
      const id = saved.checkpoint?.checkpoint_id ?? saved.configurable?.checkpoint_id;
      stream({ checkpointId: id });
    });

  const visible = (paths: Set<string>) => new Set([...paths].map((p) => visibleId(p, subgraphs, expanded)));
  return (
    <div className="studio">
      <div className="pane studio-graph">
        {graph.data ? (
          <GraphView
            graph={graph.data}
            expanded={expanded}
            onToggle={toggle}
            running={runningNodes(running, subgraphs, expanded)}
            visited={visible(visited)}
            next={running.size ? [] : (latest?.next ?? [])}
          />
        ) : graph.error ? (
          <>
            <ErrorNote error={graph.error} />
            <button type="button" onClick={() => void graph.reload()}>
              Try again
            </button>
          </>
        ) : (
          <p className="muted">Drawing the graph…</p>
        )}
        <p className="muted small" data-testid="run-status" aria-live="polite">
          {running.size
            ? `Running: ${[...new Set(running.values())].join(", ")}`
            : action.busy
              ? "Working…"
              : interrupts.length
                ? "Waiting for you (interrupt)"
                : latest
                  ? `Thread ${latest.checkpoint.thread_id?.slice(0, 8) ?? ""} · ${latest.next.length ? `next: ${latest.next.join(", ")}` : "finished"}`
                  : "No run yet"}
        </p>
      </div>
      <div className="pane grow studio-side">
        <div className="tabs" role="tablist">
          <button
            role="tab"
            aria-selected={tab === "run"}
            className={tab === "run" ? "on" : ""}
            onClick={() => setTab("run")}
          >
            Run and steps
          </button>
          <button
            role="tab"
            aria-selected={tab === "assistant"}
            className={tab === "assistant" ? "on" : ""}
            onClick={() => setTab("assistant")}
          >
            Assistant
          </button>
        </div>
        {tab === "assistant" ? (
          <AssistantPane client={client} assistant={assistant} onSaved={props.onAssistantSaved} />
        ) : (
          <>
            {interrupts.length && !action.busy ? (
              <InterruptPane values={interrupts} busy={action.busy} onResume={(command) => stream({ command })} />
            ) : null}
            <form className="card run-form" onSubmit={run} aria-label="Run">
              <label className="field">
                <span className="label">Input (JSON, from the graph's input schema)</span>
                <textarea
                  name="run_input"
                  className="mono"
                  rows={4}
                  spellCheck={false}
                  value={input ?? JSON.stringify(skeletonFor(schemas.data?.input_schema), null, 2)}
                  onChange={(e) => setInput(e.target.value)}
                />
                {inputError ? (
                  <span className="field-error" role="alert">
                    {inputError}
                  </span>
                ) : schemaFields(schemas.data?.input_schema).length ? (
                  <span className="hint">Input keys: {schemaFields(schemas.data?.input_schema).join(", ")}</span>
                ) : null}
              </label>
              <div className="row">
                <button className="primary" type="submit" disabled={action.busy}>
                  {action.busy ? "Running…" : threadId ? "Run on this thread" : "Run"}
                </button>
                {action.busy ? (
                  <button type="button" onClick={() => abort.current?.abort()}>
                    Stop
                  </button>
                ) : null}
              </div>
            </form>
            <ErrorNote error={action.error ?? history.error} />
            <StepsPane
              steps={steps}
              selected={selected}
              onSelect={setSelected}
              onReplay={replay}
              onFork={fork}
              busy={action.busy}
            />
          </>
        )}
      </div>
    </div>
  );
}

function describeError(data: unknown): string {
  const d = data as { message?: string; error?: string } | null;
  return d?.message ?? d?.error ?? JSON.stringify(data);
}
