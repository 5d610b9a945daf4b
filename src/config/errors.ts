/** Configuration errors, in a module without dependencies so the CLI can check them before loading zod. */
export class ConfigError extends Error {}
export class SettingsError extends Error {}
