import { ConfigError, loadConfig, type WharfConfig } from "../config/index.ts";

/** The configuration, or exit 2 with every bad variable named (commands that start servers). */
export function loadConfigOrExit(): WharfConfig {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`wharf: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
}
