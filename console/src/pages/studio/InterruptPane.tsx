import { useState } from "react";
import { parseCommand, resumeValue } from "./steps.ts";

/** A waiting interrupt: resume it with a value, or send a whole `Command` (resume, update, goto). */
export function InterruptPane(props: {
  values: unknown[];
  onResume: (command: { resume?: unknown; update?: unknown; goto?: unknown }) => void;
  busy: boolean;
}) {
  const [mode, setMode] = useState<"value" | "command">("value");
  const [text, setText] = useState("");
  const [error, setError] = useState<string | null>(null);
  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    if (mode === "value") return props.onResume({ resume: resumeValue(text) });
    const parsed = parseCommand(text);
    if (!parsed.ok) return setError(parsed.error);
    setError(null);
    props.onResume(parsed.value);
  };
  return (
    <form className="card interrupt" onSubmit={submit} aria-label="Interrupt">
      <strong>The run is waiting for you</strong>
      {props.values.map((v, i) => (
        <pre key={i} data-testid="interrupt-value">
          {JSON.stringify(v, null, 2)}
        </pre>
      ))}
      <div className="segmented" role="group" aria-label="Resume with">
        <button
          type="button"
          className={mode === "value" ? "on" : ""}
          aria-pressed={mode === "value"}
          onClick={() => setMode("value")}
        >
          A value
        </button>
        <button
          type="button"
          className={mode === "command" ? "on" : ""}
          aria-pressed={mode === "command"}
          onClick={() => setMode("command")}
        >
          A command
        </button>
      </div>
      <label className="field">
        <span className="label">
          {mode === "value" ? "Resume value (text or JSON)" : "Command (JSON with resume, update, goto)"}
        </span>
        <textarea
          name="resume"
          className="mono"
          rows={3}
          spellCheck={false}
          value={text}
          placeholder={mode === "value" ? "yes" : '{"resume": "yes", "update": {}}'}
          onChange={(e) => setText(e.target.value)}
        />
        {error ? (
          <span className="field-error" role="alert">
            {error}
          </span>
        ) : null}
      </label>
      <button className="primary" type="submit" disabled={props.busy}>
        Resume
      </button>
    </form>
  );
}
