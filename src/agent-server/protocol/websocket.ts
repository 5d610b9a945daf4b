import type http from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import { resolveAuth } from "../auth/request-auth.ts";
import { AgentError } from "../errors.ts";
import { HttpError } from "../../http/errors.ts";
import { checkThreadAccess } from "./access.ts";
import { protocolError } from "./events.ts";
import { matches, unknownChannels, type EventFilter } from "./filters.ts";
import type { ProtocolService } from "./service.ts";
import { planReconnect } from "./reconnect.ts";
import type { ThreadLog } from "./thread-log.ts";

const PATH = /^\/threads\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\/stream\/events$/i;
/** What a socket may have unsent before the server gives up on it (a client that never reads). */
const MAX_BUFFERED = 8 << 20;
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function reject(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ detail: message });
  socket.end(
    `HTTP/1.1 ${status} ${status === 401 ? "Unauthorized" : status === 403 ? "Forbidden" : "Error"}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * `WS /threads/{id}/stream/events`: the protocol over one WebSocket. Commands in, responses and
 * events out; the socket's subscriptions choose the events (a new one first replays what the
 * current run already sent). Authentication is the REST routes' (headers of the upgrade request).
 */
export function attachProtocolWebSocket(
  server: http.Server,
  ctx: AgentServerContext,
  service: ProtocolService,
  stopSignal: AbortSignal,
): void {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4 << 20 });
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const m = PATH.exec((req.url ?? "").split("?")[0]);
    if (!m) return; // someone else's upgrade
    void (async () => {
      try {
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
        const auth = await resolveAuth(ctx, new Request(`http://localhost${req.url}`, { headers }));
        const threadId = m[1].toLowerCase();
        let denied: string | null = null;
        try {
          await checkThreadAccess(ctx, auth, threadId);
        } catch (err) {
          if (!(err instanceof AgentError)) throw err;
          denied = err.message;
        }
        // Replicas: the thread's shared events are here before the socket serves them.
        if (!denied) await service.logs.open(threadId);
        wss.handleUpgrade(req, socket, head, (ws) => {
          // Another user's thread: one clear error on this socket, then it closes.
          if (denied) {
            ws.send(JSON.stringify(protocolError(null, "permission_denied", denied)));
            ws.close(1008, "thread not accessible");
            return;
          }
          serveSocket(ws, threadId, { auth, headers }, service, stopSignal);
        });
      } catch (err) {
        if (err instanceof HttpError || err instanceof AgentError)
          reject(
            socket,
            err.status,
            err instanceof HttpError && typeof err.detail === "string" ? err.detail : err.message,
          );
        else {
          ctx.log.error({ err }, "protocol websocket upgrade failed");
          reject(socket, 500, "Internal server error");
        }
      }
    })();
  });
}

interface Subscription extends EventFilter {
  id: string;
}

/** Parses a subscribe command's params into a subscription, or says what is wrong. */
export function parseSubscribe(params: unknown): Omit<Subscription, "id"> | string {
  const p = isRecord(params) ? params : {};
  if (!Array.isArray(p.channels) || p.channels.length === 0 || !p.channels.every((c) => typeof c === "string"))
    return "subscription.subscribe requires a non-empty channels array.";
  const unknown = unknownChannels(p.channels as string[]);
  if (unknown.length) return `subscription.subscribe received an unsupported channel: ${unknown.join(", ")}`;
  const namespaces =
    Array.isArray(p.namespaces) && p.namespaces.every((n) => Array.isArray(n) && n.every((s) => typeof s === "string"))
      ? (p.namespaces as string[][])
      : undefined;
  const depth = typeof p.depth === "number" && Number.isInteger(p.depth) && p.depth >= 0 ? p.depth : undefined;
  return { channels: new Set(p.channels as string[]), namespaces, depth };
}

/** What a socket's command handlers share: its thread's log, its subscriptions and its sender. */
interface Session {
  threadId: string;
  log: ThreadLog;
  subs: Map<string, Subscription>;
  /** The last event the socket's loop has looked at: replays cover up to here, the loop the rest. */
  cursor: number;
  send(message: unknown): void;
}

/** Sends to a socket, ending it (alone, with the reason) once its client stops reading. */
function socketSender(ws: WebSocket): (message: unknown) => void {
  let overflowed = false;
  return (message) => {
    if (ws.readyState !== ws.OPEN || overflowed) return;
    if (ws.bufferedAmount > MAX_BUFFERED) {
      overflowed = true;
      const error = protocolError(null, "unknown_error", "The client is not reading its events; closing this stream.");
      ws.send(JSON.stringify(error));
      ws.close(1013, "client not reading");
      return;
    }
    ws.send(JSON.stringify(message));
  };
}

const meta = (s: Session) => ({ thread_id: s.threadId, applied_through_seq: s.log.lastSeq });

/** `subscription.subscribe`: what the current run already sent that the subscription takes, then live events. */
function subscribe(s: Session, id: number, params: unknown): void {
  const parsed = parseSubscribe(params);
  if (typeof parsed === "string") return s.send(protocolError(id, "invalid_argument", parsed));
  const sub: Subscription = { id: s.log.addSubscription(parsed), ...parsed };
  const from = s.log.runStartSeq;
  const replay = s.log.events.filter((e) => e.seq > from && e.seq <= s.cursor && matches(sub, e));
  s.subs.set(sub.id, sub);
  s.send({ type: "success", id, result: { subscription_id: sub.id, replayed_events: replay.length }, meta: meta(s) });
  for (const e of replay) s.send(e);
}

function unsubscribe(s: Session, id: number, params: unknown): void {
  const subId = isRecord(params) ? params.subscription_id : undefined;
  if (typeof subId !== "string")
    return s.send(protocolError(id, "invalid_argument", "subscription.unsubscribe requires a subscription_id."));
  if (!s.subs.delete(subId)) return s.send(protocolError(id, "no_such_subscription", `Unknown subscription: ${subId}`));
  s.log.subscriptions.delete(subId);
  s.send({ type: "success", id, result: {}, meta: meta(s) });
}

/** `subscription.reconnect`: the restored subscriptions' events after the client's last one, each once; live ones follow. */
function reconnect(s: Session, id: number, params: unknown): void {
  const plan = planReconnect(params, s.log);
  if ("error" in plan) return s.send(protocolError(id, plan.error, plan.message));
  for (const [subId, filter] of plan.restore) s.subs.set(subId, { id: subId, ...filter });
  const restored = plan.restore.map(([, f]) => f);
  const missed = s.log.events.filter(
    (e) => e.seq > plan.after && e.seq <= s.cursor && restored.some((f) => matches(f, e)),
  );
  const current_namespaces = [...s.log.namespaces.values()].map((n) => ({ namespace: n.namespace, status: n.status }));
  const result = { restored: plan.complete, missed_events: missed.length, current_namespaces };
  s.send({ type: "success", id, result, meta: meta(s) });
  for (const e of missed) s.send(e);
}

/** A command's envelope, or null when it has no integer id and string method. */
function envelope(payload: unknown): { id: number; method: string; params: unknown } | null {
  if (!isRecord(payload) || typeof payload.method !== "string") return null;
  const id = payload.id;
  if (typeof id !== "number" || !Number.isInteger(id) || id < 0) return null;
  return { id, method: payload.method, params: payload.params };
}

/** Sends the socket's subscribed events as the thread's log receives them, until `signal` aborts. */
async function forward(s: Session, signal: AbortSignal): Promise<void> {
  for await (const ev of s.log.follow(s.cursor, signal)) {
    s.cursor = ev.seq;
    for (const sub of s.subs.values()) {
      if (matches(sub, ev)) {
        s.send(ev);
        break;
      }
    }
  }
}

function serveSocket(
  ws: WebSocket,
  threadId: string,
  caller: { auth: AuthContext | null; headers: Headers },
  service: ProtocolService,
  stopSignal: AbortSignal,
): void {
  const log = service.logs.get(threadId);
  const session: Session = { threadId, log, subs: new Map(), cursor: log.lastSeq, send: socketSender(ws) };
  const stop = new AbortController();
  const onStop = () => ws.close(1001, "server stopping");
  stopSignal.addEventListener("abort", onStop, { once: true });
  void forward(session, stop.signal);

  const onCommand = async (raw: RawData) => {
    let payload: unknown;
    try {
      payload = JSON.parse(raw.toString());
    } catch {
      return session.send(protocolError(null, "invalid_argument", "Protocol commands must be valid JSON."));
    }
    const cmd = envelope(payload);
    if (!cmd) {
      const message = "Protocol commands must include an integer id and string method.";
      return session.send(protocolError(null, "invalid_argument", message));
    }
    if (cmd.method === "subscription.subscribe") return subscribe(session, cmd.id, cmd.params);
    if (cmd.method === "subscription.unsubscribe") return unsubscribe(session, cmd.id, cmd.params);
    if (cmd.method === "subscription.reconnect") return reconnect(session, cmd.id, cmd.params);
    session.send(await service.handle(threadId, cmd, caller));
  };

  // Commands are answered in the order they came.
  let queue = Promise.resolve();
  ws.on("message", (raw) => {
    queue = queue
      .then(() => onCommand(raw))
      .catch(() => session.send(protocolError(null, "unknown_error", "The command could not be handled.")));
  });
  ws.on("close", () => {
    stop.abort();
    stopSignal.removeEventListener("abort", onStop);
  });
  ws.on("error", () => stop.abort());
}
