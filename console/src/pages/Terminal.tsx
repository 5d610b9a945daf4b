import { useEffect, useRef, useState } from "react";
import { Terminal as XTerm } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";

// The shell prints this title sequence (invisible in a terminal) only when stdin is a tty, so the
// page knows whether the data plane gave it a pty or plain pipes.
const PTY_MARK = "\x1b]0;wharf\x07";
const SHELL = `if [ -t 0 ]; then printf '${PTY_MARK.replace("\x1b", "\\033").replace("\x07", "\\007")}'; fi; export TERM=xterm-256color; exec bash -i`;

/**
 * A live shell over the data plane's `/execute/ws` (the session cookie authenticates the
 * WebSocket; the server checks its Origin). With a pty keystrokes go through raw; over pipes the
 * page edits the line itself and sends it on Enter.
 */
export default function Terminal({ dataplane }: { dataplane: string }) {
  const host = useRef<HTMLDivElement>(null);
  const [state, setState] = useState("connecting");
  useEffect(() => {
    const term = new XTerm({
      convertEol: true,
      cursorBlink: true,
      fontSize: 14,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
      theme: { background: "#0f172a", foreground: "#e2e8f0" },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current!);
    fit.fit();
    const onResize = () => fit.fit();
    window.addEventListener("resize", onResize);
    const ws = new WebSocket(
      `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${dataplane}/execute/ws`,
    );
    let mode: "unknown" | "pty" | "pipe" = "unknown";
    let line = "";
    const send = (m: unknown) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify(m));
    ws.onopen = () => {
      setState("connected");
      // cols/rows: the terminal's size for the pty (ignored by a data plane that does not know them).
      send({
        type: "execute",
        command: SHELL,
        pty: true,
        cols: term.cols,
        rows: term.rows,
        timeout_seconds: 0,
        idle_timeout_seconds: 1800,
        kill_on_disconnect: true,
        ttl_seconds: 60,
      });
    };
    ws.onmessage = (ev) => {
      const m = JSON.parse(String(ev.data)) as { type: string; data?: string; exit_code?: number; error?: string };
      if (m.type === "stdout" || m.type === "stderr") {
        let data = m.data ?? "";
        if (mode === "unknown") {
          mode = data.includes(PTY_MARK) ? "pty" : "pipe";
          setState(mode === "pty" ? "pty" : "pipes (no pty)");
          // The size may have changed while the shell started.
          if (mode === "pty") send({ type: "resize", cols: term.cols, rows: term.rows });
        }
        data = data.replace(PTY_MARK, "");
        // bash's complaints about having no tty say nothing useful on pipes.
        if (mode === "pipe")
          data = data.replace(/^bash: (cannot set terminal process group.*|no job control in this shell)\r?\n/gm, "");
        term.write(data);
      } else if (m.type === "exit") {
        term.write(`\r\n[process exited with code ${m.exit_code}]\r\n`);
        setState("exited");
      } else if (m.type === "error") {
        term.write(`\r\n[${m.error}]\r\n`);
        setState("error");
      }
    };
    ws.onclose = () => setState((s) => (s === "exited" || s === "error" ? s : "disconnected"));
    // The pty follows the terminal's size (the window or the phone rotating).
    const resized = term.onResize(({ cols, rows }) => mode === "pty" && send({ type: "resize", cols, rows }));
    const input = term.onData((data) => {
      if (mode === "pty") return send({ type: "input", data });
      // Pipes: echo locally and send whole lines.
      for (const ch of data) {
        if (ch === "\r") {
          // An interactive bash on pipes echoes each line it reads: remove ours first.
          if (line) term.write(`\x1b[${line.length}D\x1b[K`);
          send({ type: "input", data: line + "\n" });
          line = "";
        } else if (ch === "\x7f") {
          if (line) {
            line = line.slice(0, -1);
            term.write("\b \b");
          }
        } else if (ch === "\x03") {
          send({ type: "kill" });
        } else if (ch >= " ") {
          line += ch;
          term.write(ch);
        }
      }
    });
    term.focus();
    return () => {
      input.dispose();
      resized.dispose();
      window.removeEventListener("resize", onResize);
      ws.close();
      term.dispose();
    };
  }, [dataplane]);
  return (
    <div className="terminal-wrap">
      <div className="muted small">
        Shell: <span data-testid="terminal-state">{state}</span>
      </div>
      <div className="terminal" ref={host} data-testid="terminal" />
    </div>
  );
}
