import { Auth, HTTPException, isStudioUser } from "@langchain/langgraph-sdk/auth";

interface DemoUser {
  identity: string;
  display_name: string;
  /** A per-user credential the agent uses on the user's behalf (never stored in graph state). */
  api_token: string;
}

/**
 * Bearer tokens accepted by this example. Replace with a real check (verify a JWT from your
 * identity provider); `CHAT_AGENT_USERS` (JSON: token → user) overrides the demo users.
 */
function users(): Record<string, DemoUser> {
  if (process.env.CHAT_AGENT_USERS) return JSON.parse(process.env.CHAT_AGENT_USERS) as Record<string, DemoUser>;
  return {
    "demo-token-alice": { identity: "alice", display_name: "Alice", api_token: "svc-alice-4f1a" },
    "demo-token-bob": { identity: "bob", display_name: "Bob", api_token: "svc-bob-9c2e" },
  };
}

export const auth = new Auth()
  .authenticate(async (request: Request) => {
    const header = request.headers.get("authorization");
    if (!header || !/^bearer\s+/i.test(header)) {
      throw new HTTPException(401, { message: "Missing bearer token", headers: { "WWW-Authenticate": "Bearer" } });
    }
    const user = users()[header.replace(/^bearer\s+/i, "").trim()];
    if (!user) throw new HTTPException(401, { message: "Invalid token", headers: { "WWW-Authenticate": "Bearer" } });
    return { ...user, permissions: ["threads:write", "threads:read"] };
  })
  // Every thread is stamped with its owner, and each user only ever sees their own.
  .on("threads:create", ({ value, user }) => {
    value.metadata ??= {};
    value.metadata.owner = user.identity;
  })
  .on("threads:create_run", ({ value, user }) => {
    value.metadata ??= {};
    value.metadata.owner = user.identity;
    return isStudioUser(user) ? undefined : { owner: user.identity };
  })
  .on("threads", ({ user }) => (isStudioUser(user) ? undefined : { owner: user.identity }))
  .on("assistants", () => undefined);
