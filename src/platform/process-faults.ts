import type { Logger } from "../log/logger.ts";
import { FAULT_EXIT_CODE, uncaughtExceptionVerdict, unhandledRejectionVerdict } from "./fault-policy.ts";

/**
 * Installs the process-level policy for errors nothing caught (`fault-policy.ts`): log them with
 * the error, keep serving when they belong to one connection or stream, else exit with
 * `FAULT_EXIT_CODE` for the supervisor to start a fresh process. Returns a function that removes it.
 */
export function installFaultPolicy(
  log: Logger,
  exit: (code: number) => void = (code) => process.exit(code),
): () => void {
  let contained = 0;
  const onException = (err: Error, origin: string) => {
    if (uncaughtExceptionVerdict(err) === "contain") {
      contained++;
      log.error(
        { err, origin, contained },
        "an error from one connection or stream reached the process: contained, the platform serves on",
      );
      return;
    }
    log.fatal(
      { err, origin },
      "uncaught error: the process's state is unknown; exiting for the supervisor to start a fresh one",
    );
    // pino writes synchronously to stdout/stderr: the line is out before the exit.
    exit(FAULT_EXIT_CODE);
  };
  const onRejection = (reason: unknown) => {
    if (unhandledRejectionVerdict() === "contain") {
      contained++;
      log.error({ err: reason, contained }, "unhandled promise rejection: contained, the platform serves on");
    }
  };
  process.on("uncaughtException", onException);
  process.on("unhandledRejection", onRejection);
  return () => {
    process.off("uncaughtException", onException);
    process.off("unhandledRejection", onRejection);
  };
}
