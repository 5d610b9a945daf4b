import { useState } from "react";
import type { Client } from "@langchain/langgraph-sdk";
import { ErrorNote, useAction, useLoad } from "../../ui.tsx";
import { parseObject, skeletonFor } from "./steps.ts";

export interface AssistantLike {
  assistant_id: string;
  graph_id: string;
  name?: string;
  version?: number;
  config?: { configurable?: Record<string, unknown> };
  context?: unknown;
}

const json = (v: unknown) => JSON.stringify(v ?? {}, null, 2);

/**
 * The assistant's configuration and context, edited as JSON seeded from the graph's schemas; saving
 * makes a new version of the assistant (`PATCH /assistants/{id}`), which later runs use.
 */
export function AssistantPane({
  client,
  assistant,
  onSaved,
}: {
  client: Client;
  assistant: AssistantLike;
  onSaved: () => void;
}) {
  const schemas = useLoad(() => client.assistants.getSchemas(assistant.assistant_id), [client, assistant.assistant_id]);
  const contextSchema = schemas.data?.context_schema;
  const configSchema = schemas.data?.config_schema;
  const initialContext =
    assistant.context && Object.keys(assistant.context as object).length
      ? assistant.context
      : skeletonFor(contextSchema);
  const [context, setContext] = useState<string | null>(null);
  const [configurable, setConfigurable] = useState<string | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const action = useAction();
  const save = (e: React.FormEvent) => {
    e.preventDefault();
    const ctx = parseObject(context ?? json(initialContext), "The context");
    const cfg = parseObject(configurable ?? json(assistant.config?.configurable), "The configuration");
    if (!ctx.ok || !cfg.ok) return setProblem(!ctx.ok ? ctx.error : !cfg.ok ? cfg.error : null);
    setProblem(null);
    void action.run(async () => {
      await client.assistants.update(assistant.assistant_id, {
        config: { ...assistant.config, configurable: cfg.value },
        context: ctx.value,
      });
      onSaved();
    });
  };
  const fields = (schema: unknown) => Object.keys((schema as { properties?: object } | null)?.properties ?? {});
  return (
    <form className="card assistant-pane" onSubmit={save} aria-label="Assistant settings">
      <h2>
        Assistant{" "}
        <span className="muted small">
          {assistant.name || assistant.graph_id}
          {assistant.version ? ` · version ${assistant.version}` : ""}
        </span>
      </h2>
      <label className="field">
        <span className="label">Context (JSON)</span>
        <textarea
          name="assistant_context"
          className="mono"
          rows={4}
          spellCheck={false}
          value={context ?? json(initialContext)}
          onChange={(e) => setContext(e.target.value)}
        />
        <span className="hint">
          {contextSchema
            ? `The graph's context schema has: ${fields(contextSchema).join(", ") || "no fields"}`
            : "The graph declares no context schema"}
        </span>
      </label>
      <label className="field">
        <span className="label">Configuration: configurable (JSON)</span>
        <textarea
          name="assistant_configurable"
          className="mono"
          rows={3}
          spellCheck={false}
          value={configurable ?? json(assistant.config?.configurable)}
          onChange={(e) => setConfigurable(e.target.value)}
        />
        <span className="hint">
          {configSchema
            ? `Fields: ${fields(configSchema).join(", ") || "none"}`
            : "The graph declares no configuration schema"}
        </span>
      </label>
      {problem ? (
        <div className="error" role="alert">
          {problem}
        </div>
      ) : null}
      <ErrorNote error={schemas.error ?? action.error} />
      <button type="submit" className="primary" disabled={action.busy}>
        {action.busy ? "Saving…" : "Save assistant"}
      </button>
    </form>
  );
}
