import { useState } from "react";
import { When } from "../../ui.tsx";
import { editedPart, parseObject, type Step } from "./steps.ts";

const json = (v: unknown) => JSON.stringify(v, null, 2);

/** Every checkpoint of the thread, oldest first; the selected one's state, writes and actions. */
export function StepsPane(props: {
  steps: Step[];
  selected: string | null;
  onSelect: (checkpointId: string) => void;
  onReplay: (step: Step) => void;
  onFork: (step: Step, values: Record<string, unknown>) => void;
  busy: boolean;
}) {
  const { steps } = props;
  const step = steps.find((s) => s.checkpointId === props.selected) ?? steps[steps.length - 1];
  return (
    <div className="steps-pane">
      <h2>Steps</h2>
      {steps.length === 0 ? <p className="muted">Run the graph to see its state after every step.</p> : null}
      <ol className="steps" aria-label="Checkpoints">
        {steps.map((s) => (
          <li key={s.checkpointId} className={s === step ? "selected" : ""}>
            <button
              type="button"
              className="link"
              aria-current={s === step ? "true" : undefined}
              data-step={s.step}
              data-wrote={s.wrote.join(",")}
              onClick={() => props.onSelect(s.checkpointId)}
            >
              <span className="step-no">{s.step}</span>{" "}
              <span>{s.wrote.length ? s.wrote.join(", ") : s.source || "step"}</span>
              {s.next.length ? <span className="muted small"> → {s.next.join(", ")}</span> : null}
              {s.writes && typeof s.writes === "object" && s.source !== "input" ? (
                <span className="muted small"> (wrote {Object.keys(s.writes).join(", ")})</span>
              ) : null}
            </button>
          </li>
        ))}
      </ol>
      {step ? (
        <StepDetail
          key={step.checkpointId}
          step={step}
          onReplay={props.onReplay}
          onFork={props.onFork}
          busy={props.busy}
        />
      ) : null}
    </div>
  );
}

function StepDetail({
  step,
  onReplay,
  onFork,
  busy,
}: {
  step: Step;
  onReplay: (s: Step) => void;
  onFork: (s: Step, v: Record<string, unknown>) => void;
  busy: boolean;
}) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(json(step.values));
  const [error, setError] = useState<string | null>(null);
  const fork = () => {
    const parsed = parseObject(text, "The state");
    if (!parsed.ok) return setError(parsed.error);
    const part = editedPart(step.values, parsed.value);
    if (!Object.keys(part).length) return setError("Nothing changed: edit a value first.");
    setError(null);
    onFork(step, part);
  };
  return (
    <section className="step-detail card" aria-label="Selected step" data-testid="step-detail">
      <h3>
        Step {step.step} <span className="muted small mono">{step.checkpointId.slice(-8)}</span>{" "}
        {step.at ? (
          <span className="muted small">
            <When iso={step.at} />
          </span>
        ) : null}
      </h3>
      {step.writes ? (
        <>
          <h4>Writes</h4>
          <pre data-testid="step-writes">{json(step.writes)}</pre>
        </>
      ) : null}
      <h4>State</h4>
      {editing ? (
        <label className="field">
          <span className="label">
            State values (JSON): forking saves what you changed as a new checkpoint after this one and runs on from it
          </span>
          <textarea
            name="state_values"
            className="mono"
            rows={10}
            spellCheck={false}
            value={text}
            onChange={(e) => setText(e.target.value)}
          />
          {error ? (
            <span className="field-error" role="alert">
              {error}
            </span>
          ) : null}
        </label>
      ) : (
        <pre data-testid="step-state">{json(step.values)}</pre>
      )}
      <p className="muted small">Next: {step.next.length ? step.next.join(", ") : "nothing (the run ended here)"}</p>
      <div className="row wrap">
        {editing ? (
          <>
            <button type="button" className="primary" onClick={fork} disabled={busy}>
              Fork from here
            </button>
            <button type="button" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </>
        ) : (
          <>
            <button type="button" onClick={() => (setText(json(step.values)), setEditing(true))}>
              Edit state
            </button>
            <button type="button" onClick={() => onReplay(step)} disabled={busy || !step.next.length}>
              Replay from here
            </button>
          </>
        )}
      </div>
    </section>
  );
}
