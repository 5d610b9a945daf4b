import { Option, type Command } from "commander";
import { settingsHelp } from "../config/index.ts";
import { loadConfigOrExit } from "./config-or-exit.ts";
import { serverTimeouts } from "../http/connection-guard.ts";
import { listenEarly, type EarlyListener } from "../platform/early-listener.ts";
import type { RunningPlatform } from "../platform/start-platform.ts";

export function registerUp(program: Command): void {
  program
    .command("up")
    .description("run the whole platform in one process (control plane on WHARF_HOST:WHARF_PORT)")
    .option(
      "--no-supervisor",
      "run the platform in this process, with nothing to start it again after a fault (for systemd or a container runtime that restarts it)",
    )
    .addOption(new Option("--platform-process", "the platform child of a supervising `wharf up`").hideHelp())
    .addHelpText("after", "\n" + settingsHelp())
    // `bin/wharf.js` reads these two before the CLI loads: unless `--no-supervisor`, it runs `wharf
    // up --platform-process` as a child under `src/platform/supervisor.ts` and this runs there.
    .action(async (opts: { supervisor: boolean; platformProcess?: boolean }) => {
      const started = performance.now();
      const config = loadConfigOrExit();
      const supervisor = opts.platformProcess ? (await import("../platform/supervisor.ts")).superviseFromChild() : null;
      // Bind first, load the platform's modules second: /ok answers within moments of a restart and
      // requests that arrive meanwhile wait for the platform instead of failing.
      let listener: EarlyListener;
      try {
        listener = await listenEarly(config.host, config.port, serverTimeouts(config.settings));
      } catch (err) {
        console.error(`wharf: cannot start: cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`);
        process.exit(1);
      }
      // Signals are handled from the start: one that arrives while the platform is still starting
      // stops it gracefully as soon as it is up (the API may already be answering by then).
      let platform: RunningPlatform | null = null;
      let pending: string | null = null;
      let signals = 0;
      const shutdown = (signal: string) => {
        if (++signals > 1) process.exit(130);
        if (!platform) {
          pending = signal;
          return;
        }
        platform.ctx.log.info({ signal }, "shutting down");
        platform
          .stop()
          .then(() => process.exit(0))
          .catch((err) => {
            console.error(err);
            process.exit(1);
          });
      };
      process.on("SIGTERM", () => shutdown("SIGTERM"));
      process.on("SIGINT", () => shutdown("SIGINT"));
      try {
        const [{ startPlatform }, { createLogger }, { installFaultPolicy }] = await Promise.all([
          import("../platform/start-platform.ts"),
          import("../log/logger.ts"),
          import("../platform/process-faults.ts"),
        ]);
        const log = createLogger({ level: config.logLevel });
        // From here on, an error no handler caught is logged and contained or ends this process for
        // the supervisor to restart: it never silently takes every tenant down for good.
        installFaultPolicy(log);
        platform = await startPlatform(config, { listener, log });
      } catch (err) {
        listener.fail((err as Error).message);
        console.error(`wharf: cannot start: ${(err as Error).message}`);
        process.exit(1);
      }
      supervisor?.ready();
      const { url, bootstrap, ctx } = platform;
      ctx.log.info(
        { url, storage: ctx.store.dialect, location: ctx.store.location, ms: Math.round(performance.now() - started) },
        "wharf is up",
      );
      if (bootstrap.apiKey) {
        // Printed once, on first start; the same key is in the 0600 file for the CLI.
        process.stdout.write(
          `\nBootstrap API key (shown once; also saved to ${bootstrap.keyFile}):\n\n  ${bootstrap.apiKey}\n\n` +
            `Try: curl -H "X-Api-Key: ${bootstrap.apiKey}" ${url}/v2/secrets\n` +
            `Console: ${url}/console/ (sign in with the key)\n\n`,
        );
      }
      // `npm start` deploys the example agent through the same path as any deployment, in the
      // background: start-up does not wait for a build.
      const { ensureExampleDeployment } = await import("../deployments/index.ts");
      void ensureExampleDeployment(ctx).catch((err) =>
        ctx.log.warn({ err }, "the example deployment could not be set up"),
      );
      if (pending) {
        signals--;
        shutdown(pending);
      }
    });
}
