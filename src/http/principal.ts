/** Who is calling and which workspace the request acts on. Every `/v2` handler receives one. */
export interface Principal {
  userId: string;
  workspaceId: string;
  scheme: "api_key" | "bearer" | "session";
  /** Set when the caller authenticated with an API key. */
  apiKeyId: string | null;
}

export interface AppVariables {
  requestId: string;
  principal: Principal;
}

export interface AppEnv {
  Variables: AppVariables;
}
