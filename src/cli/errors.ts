/** A failure the CLI reports as one line and exit code 1 (kept dependency-free: the entry point imports it). */
export class CliError extends Error {}
