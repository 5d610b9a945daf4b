// `wharf up` runs the platform in a child process that it supervises (src/platform/supervisor.ts).
// The child is forked here, before the supervising process loads anything else (TypeScript, the
// CLI), so that a start answers `/ok` as soon as it would without a supervisor; what the child
// reports and the signals that arrive meanwhile are recorded for the supervisor to act on.
import { fork } from "node:child_process";

const PLATFORM_PROCESS_FLAG = "--platform-process";
const SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"];

function wantsSupervisor(argv) {
  const opts = argv.slice(3);
  return (
    argv[2] === "up" &&
    !opts.some((a) => a === "--no-supervisor" || a === PLATFORM_PROCESS_FLAG || a === "-h" || a === "--help")
  );
}

/** Forks `wharf up` as the platform child (its own process group: a terminal's Ctrl-C reaches it through the supervisor, once). */
function forkPlatform(args) {
  const child = fork(process.argv[1], [...args, PLATFORM_PROCESS_FLAG], { stdio: "inherit", detached: true });
  const state = { child, ready: false, exit: null, onExit: null };
  child.on("message", (m) => {
    if (m && m.type === "ready") state.ready = true;
  });
  child.once("exit", (code, signal) => {
    state.exit = { code, signal };
    state.onExit?.();
  });
  return state;
}

/** For a supervised `wharf up`: the first platform child, a way to fork more, and the signals received until the supervisor took over. Else null. */
export function superviseEarly(argv) {
  if (!wantsSupervisor(argv)) return null;
  const signals = [];
  const record = (s) => signals.push(s);
  for (const s of SIGNALS) process.on(s, record);
  const args = argv.slice(2);
  return {
    first: forkPlatform(args),
    fork: () => forkPlatform(args),
    takeSignals() {
      for (const s of SIGNALS) process.off(s, record);
      return signals;
    },
  };
}
