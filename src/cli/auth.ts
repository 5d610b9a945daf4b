import type { Command } from "commander";
import { CliError, callApi, connectionFromEnv, type Connection } from "./api-client.ts";
import { addConnectionOptions, printTable } from "./output.ts";
import type { AgentConnection } from "../connections/connection-store.ts";
import type { TokenSummary } from "../connections/token-vault.ts";

interface ProviderRow {
  provider_id: string;
  name: string;
  client_id: string;
  has_client_secret: boolean;
  token_endpoint_auth_method: string;
  uses_pkce: boolean;
  redirect_uri: string;
  auth_url: string;
}

interface AuthenticateAnswer {
  status: string;
  url: string | null;
  auth_id: string | null;
  metadata: Record<string, unknown> | null;
}

const list = (v: string, prev: string[] = []) => [
  ...prev,
  ...v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean),
];
const keyValue = (v: string, prev: Record<string, string> = {}) => {
  const eq = v.indexOf("=");
  if (eq < 1) throw new CliError(`--param takes name=value, got ${v}`);
  return { ...prev, [v.slice(0, eq)]: v.slice(eq + 1) };
};

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8").trim();
}

/** A spinner on stderr while waiting, only on a terminal (logs and pipes get plain lines). */
function spinner(text: string): { stop(final?: string): void } {
  if (!process.stderr.isTTY) return { stop: () => undefined }; // no spinner off a terminal: nothing to stop
  const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
  let i = 0;
  const timer = setInterval(() => process.stderr.write(`\r${frames[i++ % frames.length]} ${text}`), 100);
  return {
    stop(final) {
      clearInterval(timer);
      process.stderr.write(`\r\x1b[K${final ? final + "\n" : ""}`);
    },
  };
}

/** Long-polls the flow in short rounds until it completes, fails or the deadline passes. */
async function waitFor(
  conn: Connection,
  authId: string,
  timeoutSeconds: number,
): Promise<{ status: string; error: string | null; metadata: Record<string, unknown> | null }> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const left = Math.max(0, Math.min(30, Math.ceil((deadline - Date.now()) / 1000)));
    const r = await callApi<{ status: string; error: string | null; metadata: Record<string, unknown> | null }>(
      conn,
      "GET",
      `/v2/auth/wait/${authId}?timeout=${left}`,
    );
    if (r.status !== "pending" && r.status !== "timeout") return r;
    if (Date.now() >= deadline) return r;
  }
}

export function registerAuth(program: Command): void {
  const auth = program.command("auth").description("OAuth providers and agent connections (accounts agents act with)");
  const providers = auth.command("providers").description("manage OAuth providers (your client registrations)");
  addProviderCommands(providers);
  addConnectCommand(auth);
  addConnectionCommands(auth);
}

/** `auth providers list|add|show|rm`. */
function addProviderCommands(providers: Command): void {
  addConnectionOptions(providers.command("list").description("list providers")).action(async (opts) => {
    const rows = await callApi<ProviderRow[]>(connectionFromEnv(opts), "GET", "/v2/auth/providers");
    printTable(
      rows.map((r) => ({
        provider: r.provider_id,
        name: r.name,
        client_id: r.client_id,
        auth: r.token_endpoint_auth_method,
        pkce: String(r.uses_pkce),
        redirect_uri: r.redirect_uri,
      })),
    );
  });

  addConnectionOptions(
    providers
      .command("add <provider_id>")
      .description("register a provider; prints the redirect URI to register at the provider"),
  )
    .requiredOption("--client-id <id>", "your OAuth client id at the provider")
    .requiredOption("--auth-url <url>", "authorization endpoint")
    .requiredOption("--token-url <url>", "token endpoint")
    .option("--name <name>", "display name (default: the provider id)")
    .option("--client-secret-stdin", "read the client secret from standard input")
    .option("--client-secret <secret>", "client secret (prefer --client-secret-stdin: keeps it out of shell history)")
    .option("--auth-method <method>", "none | client_secret_basic | client_secret_post", "client_secret_post")
    .option("--no-pkce", "do not use PKCE (S256 is on by default)")
    .option("--revocation-url <url>", "RFC 7009 revocation endpoint (tokens are revoked there on delete)")
    .option("--userinfo-url <url>", "where the account label is read from")
    .option("--issuer <url>", "OpenID issuer (lets the label come from the id_token)")
    .option("--label-claim <claim>", "claim naming the account (default: email, preferred_username, login, name, sub)")
    .option("--scope-separator <sep>", "how scopes are joined in the authorize URL", " ")
    .option("--param <name=value>", "extra authorize parameter (repeatable)", keyValue)
    .action(async (providerId: string, opts) => {
      const secret = opts.clientSecretStdin ? await readStdin() : (opts.clientSecret ?? null);
      const row = await callApi<ProviderRow>(connectionFromEnv(opts), "POST", "/v2/auth/providers", {
        provider_id: providerId,
        name: opts.name ?? providerId,
        client_id: opts.clientId,
        client_secret: secret,
        auth_url: opts.authUrl,
        token_url: opts.tokenUrl,
        token_endpoint_auth_method: opts.authMethod,
        uses_pkce: opts.pkce,
        revocation_url: opts.revocationUrl ?? null,
        userinfo_url: opts.userinfoUrl ?? null,
        issuer: opts.issuer ?? null,
        account_label_claim: opts.labelClaim ?? null,
        scope_separator: opts.scopeSeparator,
        extra_authorize_params: opts.param ?? {},
      });
      console.log(`added ${row.provider_id}\nregister this redirect URI at the provider:\n  ${row.redirect_uri}`);
    });

  addConnectionOptions(
    providers.command("show <provider_id>").description("show a provider (never its secret)"),
  ).action(async (providerId: string, opts) => {
    console.log(
      JSON.stringify(
        await callApi(connectionFromEnv(opts), "GET", `/v2/auth/providers/${encodeURIComponent(providerId)}`),
        null,
        2,
      ),
    );
  });

  addConnectionOptions(
    providers
      .command("rm <provider_id>")
      .description("delete a provider with its tokens (revoked at the provider first) and connections"),
  ).action(async (providerId: string, opts) => {
    await callApi(connectionFromEnv(opts), "DELETE", `/v2/auth/providers/${encodeURIComponent(providerId)}`);
    console.log(`deleted ${providerId}`);
  });
}

function addConnectCommand(auth: Command): void {
  addConnectionOptions(
    auth
      .command("connect <provider>")
      .description("connect an account to an agent: prints the URL to open, then waits"),
  )
    .requiredOption("--agent <agent_id>", "the agent (assistant id) the account is for")
    .option("--scopes <list>", "scopes, comma-separated (repeatable)", list)
    .option("--user <user_id>", "the person the account belongs to (default: you)")
    .option("--new", "connect another account even if one exists")
    .option("--timeout <seconds>", "how long to wait for the browser", (v) => Number(v), 300)
    .action(async (provider: string, opts) => {
      const conn = connectionFromEnv(opts);
      const started = await callApi<AuthenticateAnswer>(conn, "POST", "/v2/auth/authenticate", {
        provider,
        scopes: opts.scopes ?? [],
        agent_id: opts.agent,
        user_id: opts.user ?? null,
        force_new: Boolean(opts.new),
      });
      if (started.status === "completed") {
        console.log(
          `already connected: ${provider} as ${started.metadata?.provider_account_label ?? "(unlabelled account)"} (token ${started.metadata?.token_id}); use --new to add another account`,
        );
        return;
      }
      if (started.status === "connection_required")
        console.log(
          `you have ${provider} accounts not attached to this agent (tokens: ${(started.metadata?.token_ids as string[]).join(", ")}); or connect a new one:`,
        );
      if (started.status === "token_expired") console.log(`the ${provider} connection needs re-authentication:`);
      console.log(`open this URL to connect ${provider}:\n\n  ${started.url}\n`);
      const spin = spinner("waiting for the provider to call back…");
      const done = await waitFor(conn, started.auth_id!, opts.timeout).finally(() => spin.stop());
      if (done.status !== "completed")
        throw new CliError(`not connected (${done.status}${done.error ? `: ${done.error}` : ""})`);
      console.log(
        `connected ${provider} as ${done.metadata?.provider_account_label ?? "(unlabelled account)"} to agent ${opts.agent} (token ${done.metadata?.token_id})`,
      );
    });
}

/** `auth connections`, `tokens`, `disconnect`. */
function addConnectionCommands(auth: Command): void {
  addConnectionOptions(auth.command("connections <agent_id>").description("list an agent's connections")).action(
    async (agentId: string, opts) => {
      const { data } = await callApi<{ data: AgentConnection[] }>(
        connectionFromEnv(opts),
        "GET",
        `/v2/auth/agents/${encodeURIComponent(agentId)}/connections`,
      );
      printTable(
        data.map((c) => ({
          id: c.id,
          provider: c.provider_id,
          account: c.provider_account_label ?? "",
          scopes: c.scopes.join(" "),
          expires: c.expires_at ?? "",
          token: c.oauth_token_id,
        })),
      );
    },
  );

  addConnectionOptions(auth.command("tokens").description("list your connected accounts (never the tokens)"))
    .option("--provider <provider_id>", "only this provider")
    .option("--user <user_id>", "another owner's accounts")
    .action(async (opts) => {
      const q = new URLSearchParams();
      if (opts.provider) q.set("provider_id", opts.provider);
      if (opts.user) q.set("user_id", opts.user);
      const rows = await callApi<TokenSummary[]>(
        connectionFromEnv(opts),
        "GET",
        `/v2/auth/tokens${q.size ? `?${q}` : ""}`,
      );
      printTable(
        rows.map((r) => ({
          id: r.id,
          provider: r.provider_id,
          account: r.provider_account_label ?? "",
          default: r.is_default ? "yes" : "",
          status: r.status,
          expires: r.expires_at ?? "",
        })),
      );
    });

  addConnectionOptions(
    auth
      .command("disconnect <token_id>")
      .description("revoke an account's token at the provider, then delete it and its connections"),
  )
    .option("--force", "delete here even if the provider cannot revoke it")
    .option("--user <user_id>", "another owner's account")
    .action(async (tokenId: string, opts) => {
      const q = new URLSearchParams();
      if (opts.force) q.set("force", "true");
      if (opts.user) q.set("user_id", opts.user);
      await callApi(
        connectionFromEnv(opts),
        "DELETE",
        `/v2/auth/tokens/${encodeURIComponent(tokenId)}${q.size ? `?${q}` : ""}`,
      );
      console.log(`revoked and deleted ${tokenId}`);
    });
}
