import type { PythonWorker } from "../src/agent-server/python/worker.ts";

/** One stateless run of the echo graph straight on a worker (no server), as the agent server asks for it. */
export function echoRunOnWorker(worker: PythonWorker, i: number, input: unknown): Promise<unknown> {
  return worker.request(
    "run.start",
    {
      run_id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      graph_id: "echo",
      temporary: true,
      stream_mode: ["values"],
      subgraphs: false,
      input,
      config: { configurable: {} },
    },
    () => {},
  );
}
