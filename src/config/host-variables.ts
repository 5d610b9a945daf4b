/**
 * Variables of the host's environment that are not Wharf settings but conventions other tools share
 * (OpenSSL's CA bundle, the command search path, LangGraph's own `LANGGRAPH_CONFIG`): read here, so
 * features read no process.env of their own.
 */
export type HostVariable = "SSL_CERT_FILE" | "PATH" | "PYTHONPATH" | "LANGGRAPH_CONFIG" | "LANG" | "TZ";

export function hostVariable(name: HostVariable): string | undefined {
  return process.env[name] || undefined;
}

/**
 * The process's whole environment, for what is handed on, not read as configuration: a child that
 * runs the project's code sees what a graph in this process sees, and a project's `env` map fills in
 * what the operator left unset.
 */
export function processEnvironment(): NodeJS.ProcessEnv {
  return process.env;
}
