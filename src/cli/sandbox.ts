import fs from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import WebSocket from "ws";
import { CliError, callApi, connectionFromEnv, type Connection } from "./api-client.ts";
import { addConnectionOptions, printTable } from "./output.ts";

interface Box {
  id: string;
  name: string;
  status: string;
  status_message: string | null;
  dataplane_url: string;
  [k: string]: unknown;
}

const enc = encodeURIComponent;

function pairs(list: string[] | undefined, what: string): Record<string, string> | undefined {
  if (!list?.length) return undefined;
  const out: Record<string, string> = {};
  for (const item of list) {
    const i = item.indexOf("=");
    if (i <= 0) throw new CliError(`${what} must be KEY=VALUE, got ${item}`);
    out[item.slice(0, i)] = item.slice(i + 1);
  }
  return out;
}
const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Shell-quotes argv so `wharf sandbox exec box -- python3 -c "print(1)"` runs exactly that. */
export function shellJoin(argv: string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(" ");
}

async function waitReady(conn: Connection, name: string, timeoutS: number): Promise<Box> {
  const started = Date.now();
  const tty = process.stderr.isTTY;
  for (;;) {
    const s = await callApi<{ status: string; status_message: string | null }>(
      conn,
      "GET",
      `/v2/sandboxes/boxes/${enc(name)}/status`,
    );
    if (s.status === "ready") break;
    if (s.status === "failed") throw new CliError(`sandbox ${name} failed: ${s.status_message ?? "no reason given"}`);
    if (Date.now() - started > timeoutS * 1000)
      throw new CliError(`sandbox ${name} is still ${s.status} after ${timeoutS} s`);
    if (tty) process.stderr.write(`\r${name}: ${s.status} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    await new Promise((r) => setTimeout(r, 200));
  }
  if (tty) process.stderr.write("\r\x1b[K");
  return callApi<Box>(conn, "GET", `/v2/sandboxes/boxes/${enc(name)}`);
}

/** Streams a command over the execute WebSocket, re-attaching by offsets if the connection drops. */
async function streamExec(
  conn: Connection,
  box: Box,
  command: string,
  opts: { timeout: number; cwd?: string; env?: Record<string, string> },
): Promise<number> {
  let commandId: string | null = null;
  let outOffset = 0;
  let errOffset = 0;
  for (let attempt = 0; ; attempt++) {
    const result = await new Promise<{ exit?: number; error?: string; dropped?: boolean }>((resolve) => {
      const ws = new WebSocket(box.dataplane_url.replace(/^http/, "ws") + "/execute/ws", {
        headers: { "X-Api-Key": conn.apiKey ?? "", ...(conn.tenantId ? { "X-Tenant-Id": conn.tenantId } : {}) },
      });
      let settled = false;
      const done = (r: { exit?: number; error?: string; dropped?: boolean }) => {
        if (!settled) {
          settled = true;
          resolve(r);
        }
      };
      ws.on("open", () => {
        ws.send(
          JSON.stringify(
            commandId
              ? { type: "reconnect", command_id: commandId, stdout_offset: outOffset, stderr_offset: errOffset }
              : {
                  type: "execute",
                  command,
                  timeout_seconds: opts.timeout,
                  cwd: opts.cwd,
                  env: opts.env,
                  close_stdin: process.stdin.isTTY !== false,
                },
          ),
        );
      });
      ws.on("message", (raw) => {
        const m = JSON.parse(raw.toString()) as { type: string; [k: string]: any };
        if (m.type === "started") commandId = m.command_id;
        else if (m.type === "stdout" || m.type === "stderr") {
          (m.type === "stdout" ? process.stdout : process.stderr).write(m.data);
          const end = m.offset + Buffer.byteLength(m.data);
          if (m.type === "stdout") outOffset = end;
          else errOffset = end;
        } else if (m.type === "exit") done({ exit: m.exit_code });
        else if (m.type === "error") done({ error: `${m.error_type}: ${m.error}` });
      });
      ws.on("unexpected-response", (_req, res) =>
        done({ error: `the data plane refused the connection (HTTP ${res.statusCode})` }),
      );
      ws.on("error", () => done({ dropped: true }));
      ws.on("close", () => done({ dropped: true }));
      const onSigint = () => ws.readyState === ws.OPEN && ws.send(JSON.stringify({ type: "kill" }));
      process.once("SIGINT", onSigint);
    });
    if (result.exit !== undefined) return result.exit;
    if (result.error) throw new CliError(result.error);
    if (!commandId || attempt >= 5) throw new CliError("lost the connection to the sandbox");
    await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
  }
}

export function registerSandbox(program: Command): void {
  const sb = program
    .command("sandbox")
    .description("isolated Linux sandboxes: create, exec, copy files, stop, start, snapshot");
  addCreateAndListCommands(sb);
  addExecAndCopyCommands(sb);
  addLifecycleCommands(sb);
  addSnapshotAndUrlCommands(sb);
}

function addCreateAndListCommands(sb: Command): void {
  addConnectionOptions(sb.command("create [name]").description("create a sandbox and wait until it is ready"))
    .option("--snapshot <name>", "start from a snapshot (name or name:tag)")
    .option("--cpus <n>", "vCPUs", Number)
    .option("--mem <bytes>", "memory limit in bytes", Number)
    .option("--disk <bytes>", "disk capacity in bytes (fs_capacity_bytes, a hard limit)", Number)
    .option("--idle-ttl <seconds>", "stop after this many idle seconds (multiple of 60, 0 = never)", Number)
    .option("-e, --env <KEY=VALUE>", "environment variable for every command (repeatable)", collect)
    .option("-l, --label <KEY=VALUE>", "label (repeatable)", collect)
    .option("--timeout <seconds>", "how long to wait for ready", Number, 120)
    .action(async (name: string | undefined, opts) => {
      const conn = connectionFromEnv(opts);
      const box = await callApi<Box>(conn, "POST", "/v2/sandboxes/boxes", {
        name,
        snapshot_name: opts.snapshot,
        vcpus: opts.cpus,
        mem_bytes: opts.mem,
        fs_capacity_bytes: opts.disk,
        idle_ttl_seconds: opts.idleTtl,
        env_vars: pairs(opts.env, "--env"),
        labels: pairs(opts.label, "--label"),
        wait_for_ready: false,
      });
      const ready = await waitReady(conn, box.name, opts.timeout);
      console.log(`${ready.name} ${ready.status} ${ready.id}`);
    });

  addConnectionOptions(sb.command("ls").description("list sandboxes"))
    .option("--status <status>", "only this status")
    .action(async (opts) => {
      const q = opts.status ? `?status=${enc(opts.status)}&limit=500` : "?limit=500";
      const res = await callApi<{ sandboxes: Box[] }>(connectionFromEnv(opts), "GET", `/v2/sandboxes/boxes${q}`);
      printTable(
        res.sandboxes.map((b) => ({
          name: b.name,
          status: b.status,
          id: b.id,
          created: String(b.created_at),
          message: b.status_message ?? "",
        })),
      );
    });
}

function addExecAndCopyCommands(sb: Command): void {
  addConnectionOptions(
    sb
      .command("exec <name> <command...>")
      .description("run a command in a sandbox and stream its output (use -- before the command)"),
  )
    .option("--timeout <seconds>", "kill the command after this many seconds", Number, 600)
    .option("--cwd <dir>", "working directory")
    .option("-e, --env <KEY=VALUE>", "environment variable (repeatable)", collect)
    .action(async (name: string, command: string[], opts) => {
      const conn = connectionFromEnv(opts);
      const box = await callApi<Box>(conn, "GET", `/v2/sandboxes/boxes/${enc(name)}`);
      // A stopped sandbox is started by the data-plane call itself.
      if (box.status === "failed" || box.status === "deleting")
        throw new CliError(`sandbox ${name} is ${box.status}; start it with \`wharf sandbox start ${name}\``);
      const code = await streamExec(conn, box, command.length === 1 ? command[0] : shellJoin(command), {
        timeout: opts.timeout,
        cwd: opts.cwd,
        env: pairs(opts.env, "--env"),
      });
      process.exit(code);
    });

  addConnectionOptions(
    sb
      .command("cp <src> <dst>")
      .description("copy a file into (LOCAL NAME:PATH) or out of (NAME:PATH LOCAL, - for stdout) a sandbox"),
  ).action(async (src: string, dst: string, opts) => {
    const conn = connectionFromEnv(opts);
    const remote = (s: string) =>
      /^[a-z0-9][a-z0-9-]*:/.exec(s) && !fs.existsSync(s)
        ? { name: s.slice(0, s.indexOf(":")), path: s.slice(s.indexOf(":") + 1) }
        : null;
    const from = remote(src);
    const to = remote(dst);
    if (!!from === !!to) throw new CliError("exactly one of SRC and DST must be NAME:PATH");
    const box = await callApi<Box>(conn, "GET", `/v2/sandboxes/boxes/${enc((from ?? to)!.name)}`);
    const headers = { "X-Api-Key": conn.apiKey ?? "" };
    if (to) {
      const form = new FormData();
      form.set("file", new Blob([fs.readFileSync(src)]), path.basename(src));
      const res = await fetch(`${box.dataplane_url}/upload?path=${enc(to.path)}`, {
        method: "POST",
        headers,
        body: form,
      });
      if (!res.ok) throw new CliError(`upload failed (${res.status}): ${await res.text()}`);
      console.log(`copied ${src} to ${dst}`);
    } else {
      const res = await fetch(`${box.dataplane_url}/download?path=${enc(from!.path)}`, { headers });
      if (!res.ok) throw new CliError(`download failed (${res.status}): ${await res.text()}`);
      const data = Buffer.from(await res.arrayBuffer());
      if (dst === "-") process.stdout.write(data);
      else
        fs.writeFileSync(
          fs.existsSync(dst) && fs.statSync(dst).isDirectory() ? path.join(dst, path.basename(from!.path)) : dst,
          data,
        );
    }
  });
}

/** `stop`, `start`, `rm`. */
function addLifecycleCommands(sb: Command): void {
  addConnectionOptions(sb.command("stop <name>").description("stop a sandbox (its files are kept)")).action(
    async (name: string, opts) => {
      await callApi(connectionFromEnv(opts), "POST", `/v2/sandboxes/boxes/${enc(name)}/stop`, {});
      console.log(`stopped ${name}`);
    },
  );
  addConnectionOptions(sb.command("start <name>").description("start a stopped sandbox and wait until it is ready"))
    .option("--timeout <seconds>", "how long to wait for ready", Number, 120)
    .action(async (name: string, opts) => {
      const conn = connectionFromEnv(opts);
      await callApi(conn, "POST", `/v2/sandboxes/boxes/${enc(name)}/start`, { wait_for_ready: false });
      const box = await waitReady(conn, name, opts.timeout);
      console.log(`${box.name} ${box.status}`);
    });
  addConnectionOptions(sb.command("rm <name...>").description("delete sandboxes, whatever their state")).action(
    async (names: string[], opts) => {
      for (const name of names) {
        await callApi(connectionFromEnv(opts), "DELETE", `/v2/sandboxes/boxes/${enc(name)}`);
        console.log(`deleted ${name}`);
      }
    },
  );
}

function addSnapshotAndUrlCommands(sb: Command): void {
  addConnectionOptions(
    sb.command("snapshot <name> <snapshot>").description("capture a sandbox's files as a snapshot (NAME or NAME:TAG)"),
  ).action(async (name: string, snapshot: string, opts) => {
    const [snapName, tag] = snapshot.split(":", 2);
    const snap = await callApi<{
      id: string;
      name: string;
      status: string;
      status_message: string | null;
      size_bytes: number | null;
    }>(connectionFromEnv(opts), "POST", `/v2/sandboxes/boxes/${enc(name)}/snapshot`, { name: snapName, tag });
    if (snap.status === "failed") throw new CliError(`snapshot failed: ${snap.status_message}`);
    console.log(`${snap.name} ${snap.status} ${snap.id} (${snap.size_bytes ?? 0} bytes)`);
  });

  addConnectionOptions(
    sb
      .command("image <snapshot> <docker_image>")
      .description("make a snapshot from an OCI image (pulled by the server) and wait until it is ready"),
  )
    .option("--disk <bytes>", "disk capacity of sandboxes started from it", Number, 10 * 1024 ** 3)
    .option("--registry <name>", "registry credentials to pull with (see /v2/sandboxes/registries)")
    .option("--timeout <seconds>", "how long to wait", Number, 900)
    .action(async (snapshot: string, image: string, opts) => {
      const conn = connectionFromEnv(opts);
      const [snapName, tag] = snapshot.split(":", 2);
      let snap = await callApi<{
        id: string;
        name: string;
        status: string;
        status_message: string | null;
        image_digest: string | null;
      }>(conn, "POST", "/v2/sandboxes/snapshots", {
        name: snapName,
        tag,
        docker_image: image,
        fs_capacity_bytes: opts.disk,
        registry_id: opts.registry,
      });
      const started = Date.now();
      while (snap.status === "building") {
        if (Date.now() - started > opts.timeout * 1000)
          throw new CliError(`snapshot ${snapName} is still building after ${opts.timeout} s`);
        await new Promise((r) => setTimeout(r, 1000));
        snap = await callApi(conn, "GET", `/v2/sandboxes/snapshots/${enc(snap.id)}`);
      }
      if (snap.status !== "ready")
        throw new CliError(`snapshot ${snapName} failed: ${snap.status_message ?? "no reason given"}`);
      console.log(`${snap.name} ${snap.status} ${snap.id} ${snap.image_digest ?? ""}`);
    });
  addConnectionOptions(
    sb.command("url <name> <port>").description("a short-lived URL for a service listening on PORT inside the sandbox"),
  )
    .option("--expires <seconds>", "token lifetime (1-86400)", Number, 3600)
    .action(async (name: string, port: string, opts) => {
      const u = await callApi<{ browser_url: string; service_url: string; token: string; expires_at: string }>(
        connectionFromEnv(opts),
        "POST",
        `/v2/sandboxes/boxes/${enc(name)}/service-url`,
        { port: Number(port), expires_in_seconds: opts.expires },
      );
      console.log(
        `browser:  ${u.browser_url}\nservice:  ${u.service_url} (header X-Langsmith-Sandbox-Service-Token)\ntoken:    ${u.token}\nexpires:  ${u.expires_at}`,
      );
    });
}
