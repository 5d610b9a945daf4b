import type { Kysely, Transaction } from "kysely";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import { newWorkerId } from "./worker-identity.ts";
import { RunHousekeeper } from "./run-housekeeping.ts";
import type { Database } from "../../store/schema.ts";
import { getAssistant, type Assistant } from "../storage/assistants.ts";
import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import { AgentError } from "../errors.ts";
import { asJson, parseJson } from "../storage/json-columns.ts";
import { RunChannel } from "./run-channel.ts";
import { openRunSignals, signalChannel, type RunSignals } from "./run-signals.ts";
import { isPythonGraph, type PythonGraph } from "../python/index.ts";
import { executeGraph, serializeError, type RunOutcome } from "./run-executor.ts";
import { INFLIGHT, toRun, type MultitaskStrategy, type Run, type RunKwargs, type RunPrivate } from "./runs.ts";
import type { AgentRunsTable } from "../storage/tables.ts";
import { findThreadRow, setThreadOutcome, threadNotFound } from "../storage/threads.ts";
import { sendWebhook } from "./webhook.ts";
import { toJson } from "../wire.ts";
import { LANGGRAPH_VERSION, mergeConfig, noAssistant, privateConfigurable, type ActiveRun, type CancelAction, type RunCreate } from "./run-types.ts";

export type { ActiveRun, CancelAction, RunCreate } from "./run-types.ts";
export { noAssistant, privateConfigurable } from "./run-types.ts";

/**
 * How long an ended run's events stay replayable: resumable runs (`stream_resumable`, what the
 * SDK's `useStream` asks for to rejoin after a reload) for 10 minutes, others briefly (a join that
 * raced the run's end). Bounded in runs and events so memory stays small under load.
 */
const RESUMABLE_KEEP_MS = 10 * 60_000;
const ENDED_KEEP_MS = 5_000;
const ENDED_MAX = 200;
const ENDED_MAX_EVENTS = 20_000;

/**
 * Creates, queues, executes and cancels runs. Runs execute in this process as soon as they may
 * (no worker polling); the database row is the durable record: a conditional update claims a
 * pending run, a per-thread lock (PostgreSQL `FOR UPDATE`) serialises the multitask decision, and
 * a lease (renewed by one timer for all runs) lets any process end runs whose process died.
 */
export class RunEngine {
  readonly workerId = newWorkerId();
  private readonly active = new Map<string, ActiveRun>();
  private readonly privates = new Map<string, RunPrivate>();
  private readonly startWaiters = new Map<string, Array<(a: ActiveRun | null) => void>>();
  /** Followers of whole threads (`GET /threads/{id}/stream`), told of each run that starts here. */
  private readonly threadWatchers = new Map<string, Set<(a: ActiveRun) => void>>();
  private timer: NodeJS.Timeout | null = null;
  private stopping = false;
  /** Aborted when the engine stops: long-lived followers (thread streams) end with it. */
  private readonly stopped = new AbortController();
  get stopSignal(): AbortSignal {
    return this.stopped.signal;
  }
  private signals: RunSignals = { cancel: async () => {}, close: async () => {} };

  constructor(
    private readonly ctx: AgentServerContext,
    private readonly options: { leaseMs: number; apiUrl?: () => string; databaseUrl?: string | null; signalSecret?: string } = { leaseMs: 30_000 },
  ) {
    this.housekeeper = new RunHousekeeper({
      ctx: this.ctx,
      workerId: this.workerId,
      activeCount: () => this.active.size,
      isStopping: () => this.stopping,
      leaseUntil: () => this.leaseUntil(),
      lockThread: (trx, threadId) => this.lockThread(trx, threadId),
      claimNext: (trx, threadId) => this.claimNext(trx, threadId),
      startClaimed: (row) => this.startClaimed(row),
    });
  }

  private readonly housekeeper: RunHousekeeper;

  /** Ended runs' channels, kept a while so their events can be replayed (`Last-Event-ID`). */
  private readonly ended = new Map<string, { active: ActiveRun; until: number }>();

  private retainEnded(active: ActiveRun, keepMs: number): void {
    if (active.channel.events.length > ENDED_MAX_EVENTS) return;
    const now = Date.now();
    for (const [id, e] of this.ended) if (e.until < now || this.ended.size >= ENDED_MAX) this.ended.delete(id);
    this.ended.set(active.run.run_id, { active, until: now + keepMs });
  }

  /** An ended run's channel (its full event stream), if still kept. */
  endedChannel(runId: string): ActiveRun | undefined {
    const e = this.ended.get(runId);
    return e && e.until >= Date.now() ? e.active : undefined;
  }

  get(runId: string): ActiveRun | undefined {
    return this.active.get(runId);
  }

  /** The thread run executing in this process, if any. */
  activeOnThread(threadId: string): ActiveRun | undefined {
    for (const a of this.active.values()) if (a.run.thread_id === threadId && !a.run.kwargs.temporary) return a;
    return undefined;
  }

  /** Calls `fn` for every run of the thread that starts in this process from now on; returns the unsubscribe. */
  watchThread(threadId: string, fn: (a: ActiveRun) => void): () => void {
    const set = this.threadWatchers.get(threadId) ?? new Set();
    set.add(fn);
    this.threadWatchers.set(threadId, set);
    return () => {
      set.delete(fn);
      if (set.size === 0 && this.threadWatchers.get(threadId) === set) this.threadWatchers.delete(threadId);
    };
  }

  private leaseUntil(): string {
    return new Date(Date.now() + this.options.leaseMs).toISOString();
  }

  private lockThread(trx: Transaction<Database>, threadId: string) {
    let q = trx.selectFrom("agent_threads").selectAll().where("thread_id", "=", threadId).where("server_id", "=", this.ctx.serverId);
    if (this.ctx.dialect === "postgres") q = q.forUpdate();
    return q.executeTakeFirst();
  }

  /** Validates and records a run; starts it at once when its thread is free. */
  async create(threadId: string | null, body: RunCreate, auth: AuthContext | null, headers: Headers | null): Promise<{ run: Run; active: ActiveRun | null }> {
    const ctx = this.ctx;
    const assistant = await getAssistant(ctx, body.assistant_id, undefined, () => noAssistant(body.assistant_id));
    const streamMode = Array.isArray(body.stream_mode) ? [...body.stream_mode] : body.stream_mode ? [body.stream_mode] : [];
    if (streamMode.length === 0) streamMode.push("values");
    const config = mergeConfig(assistant, body.config);
    if (body.checkpoint_id) config.configurable = { ...config.configurable, checkpoint_id: body.checkpoint_id };
    if (body.checkpoint) config.configurable = { ...config.configurable, ...body.checkpoint };
    const temporary = threadId === null && (body.on_completion ?? "delete") === "delete";
    const multitask: MultitaskStrategy = threadId === null ? "reject" : (body.multitask_strategy ?? "reject");
    const runId = newId();
    const kwargs: RunKwargs = {
      input: body.input,
      command: body.command ?? null,
      config,
      context: { ...assistant.context, ...(body.context ?? {}) },
      stream_mode: streamMode,
      interrupt_before: body.interrupt_before ?? null,
      interrupt_after: body.interrupt_after ?? null,
      webhook: body.webhook ?? null,
      feedback_keys: body.feedback_keys ?? null,
      temporary,
      subgraphs: body.stream_subgraphs ?? false,
      resumable: body.stream_resumable ?? false,
      // The LangGraph server's default: a client that leaves does not stop the run.
      on_disconnect: body.on_disconnect ?? "continue",
      durability: body.durability ?? null,
    };
    // The auth handler sees (and may change) the run; metadata it adds lands on the run and thread.
    const value = {
      thread_id: threadId ?? undefined,
      assistant_id: assistant.assistant_id,
      run_id: runId,
      status: "pending",
      metadata: { ...(body.metadata ?? {}) },
      prevent_insert_if_inflight: multitask === "reject",
      multitask_strategy: multitask,
      if_not_exists: body.if_not_exists ?? "reject",
      after_seconds: body.after_seconds ?? null,
      kwargs,
    };
    const { filters } = ctx.customAuth ? await ctx.customAuth.authorize(auth, "threads:create_run", value) : { filters: undefined };
    const metadata = value.metadata ?? {};
    const priv: RunPrivate = { configurable: privateConfigurable(auth, headers) };
    const now = nowIso();
    // `after_seconds`: the run waits `pending` until then; as on the LangGraph server its
    // `created_at` is the time it may start, which is also what orders and gates its claim.
    const delayMs = Math.round((body.after_seconds ?? 0) * 1000);
    const startAt = delayMs > 0 ? new Date(Date.now() + delayMs).toISOString() : now;
    // Thread runs keep the caller's data sealed in their row, so a run whose process dies can be
    // resumed as them by another process (stateless runs die with their caller's connection).
    const sealed = temporary ? null : this.seal(runId, priv);
    const row: AgentRunsTable = {
      run_id: runId,
      server_id: ctx.serverId,
      thread_id: threadId ?? newId(),
      assistant_id: assistant.assistant_id,
      status: "running",
      metadata: asJson(metadata),
      kwargs: toJson(sealed ? { ...kwargs, sealed_private: sealed } : kwargs, false),
      multitask_strategy: multitask,
      temporary: temporary ? 1 : 0,
      worker_id: this.workerId,
      lease_until: this.leaseUntil(),
      created_at: startAt,
      updated_at: now,
    };
    const queued = (r: AgentRunsTable): AgentRunsTable => ({ ...r, status: "pending", worker_id: null, lease_until: null, kwargs: toJson({ ...kwargs, sealed_private: sealed ?? this.seal(runId, priv) }, false) });

    if (temporary && delayMs > 0) {
      await ctx.db.insertInto("agent_runs").values(queued(row)).execute();
      this.privates.set(runId, priv);
      this.startLater(row.thread_id, delayMs);
      return { run: toRun(queued(row)), active: null };
    }
    if (temporary) {
      // Stateless: no thread row, no checkpoints; the run row lives while the run does.
      await ctx.db.insertInto("agent_runs").values(row).execute();
      return { run: toRun(row), active: this.launch(toRun(row), kwargs, priv, assistant) };
    }

    const threadMetadata = { graph_id: assistant.graph_id, assistant_id: assistant.assistant_id };
    const { inflight, startNow } = await ctx.db.transaction().execute(async (trx) => {
      let thread = threadId ? await this.lockThread(trx, threadId) : undefined;
      if (thread && filters && !(await findThreadRow(trx, ctx, thread.thread_id, filters))) thread = undefined;
      if (!thread) {
        if (threadId && body.if_not_exists !== "create") throw threadNotFound(threadId);
        const inserted = await trx
          .insertInto("agent_threads")
          .values({
            thread_id: row.thread_id,
            server_id: ctx.serverId,
            status: "busy",
            metadata: asJson({ ...metadata, ...threadMetadata }),
            config: "{}",
            state_values: null,
            interrupts: null,
            created_at: now,
            updated_at: now,
          })
          .onConflict((oc) => oc.column("thread_id").doNothing())
          .executeTakeFirst();
        if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) throw new AgentError(409, `Thread with ID ${row.thread_id} already exists`);
        await trx.insertInto("agent_runs").values(delayMs > 0 ? queued(row) : row).execute();
        return { inflight: [] as string[], startNow: delayMs === 0 };
      }
      const inflightRows = await trx
        .selectFrom("agent_runs")
        .select(["run_id"])
        .where("thread_id", "=", thread.thread_id)
        .where("status", "in", INFLIGHT)
        .execute();
      const inflight = inflightRows.map((r) => r.run_id);
      if (inflight.length && multitask === "reject") {
        throw new AgentError(409, "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.");
      }
      const startNow = inflight.length === 0 && delayMs === 0;
      const stored: AgentRunsTable = startNow ? row : queued(row);
      await trx.insertInto("agent_runs").values(stored).execute();
      await trx
        .updateTable("agent_threads")
        .set({ status: "busy", updated_at: now, metadata: asJson({ ...parseJson(thread.metadata, {}), ...threadMetadata }) })
        .where("thread_id", "=", thread.thread_id)
        .execute();
      return { inflight, startNow };
    });

    const run = toRun(startNow ? row : { ...row, status: "pending" });
    if (startNow) return { run, active: this.launch(run, kwargs, priv, assistant) };
    this.privates.set(runId, priv);
    if (multitask === "interrupt" || multitask === "rollback") await this.cancel(row.thread_id, inflight, multitask);
    if (delayMs > 0) this.startLater(row.thread_id, delayMs);
    return { run, active: null };
  }

  private notifyStart(runId: string, active: ActiveRun | null): void {
    const waiters = this.startWaiters.get(runId);
    if (!waiters) return;
    this.startWaiters.delete(runId);
    for (const w of waiters) w(active);
  }

  /**
   * The executing run, waiting while it is queued. Resolves null when the run is over (or was
   * cancelled before it started). A run started by another process is noticed by re-reading its row.
   */
  async whenStarted(runId: string, signal?: AbortSignal): Promise<ActiveRun | null> {
    for (;;) {
      const local = this.active.get(runId);
      if (local) return local;
      const row = await this.ctx.db.selectFrom("agent_runs").select(["status"]).where("run_id", "=", runId).executeTakeFirst();
      if (!row || row.status !== "pending") return this.active.get(runId) ?? null;
      if (signal?.aborted) return null;
      let onAbort: (() => void) | null = null;
      const started = await new Promise<ActiveRun | null | "recheck">((resolve) => {
        const list = this.startWaiters.get(runId) ?? [];
        list.push(resolve);
        this.startWaiters.set(runId, list);
        setTimeout(() => resolve("recheck"), 1000).unref();
        onAbort = () => resolve(null);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
      if (onAbort) signal?.removeEventListener("abort", onAbort);
      if (started !== "recheck") return started;
    }
  }

  /**
   * Resolves when a run has ended: at once through this process's channel when it executes here;
   * a run executing in another process is followed through its row.
   */
  async waitForEnd(runId: string): Promise<ActiveRun | null> {
    for (;;) {
      const active = await this.whenStarted(runId);
      if (active) {
        await active.done;
        return active;
      }
      const row = await this.ctx.db.selectFrom("agent_runs").select(["status"]).where("run_id", "=", runId).executeTakeFirst();
      if (!row || !INFLIGHT.includes(row.status as never)) return null;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  private seal(runId: string, priv: RunPrivate) {
    return this.ctx.box.seal(JSON.stringify(priv), `agent-run-private:${this.ctx.serverId}:${runId}`);
  }

  private unseal(runId: string, kwargs: RunKwargs): RunPrivate {
    const known = this.privates.get(runId);
    if (known) return known;
    if (!kwargs.sealed_private) return { configurable: {} };
    try {
      return JSON.parse(this.ctx.box.open(kwargs.sealed_private, `agent-run-private:${this.ctx.serverId}:${runId}`)) as RunPrivate;
    } catch (err) {
      this.ctx.log.warn({ err, runId }, "cannot open a queued run's caller data; running without it");
      return { configurable: {} };
    }
  }

  /** Starts executing a run this process has claimed. */
  private launch(run: Run, kwargs: RunKwargs, priv: RunPrivate, assistant: Assistant | null): ActiveRun {
    const active: ActiveRun = { run, channel: new RunChannel(), abort: new AbortController(), done: null as unknown as Promise<RunOutcome> };
    this.active.set(run.run_id, active);
    this.privates.delete(run.run_id);
    active.done = this.execute(active, kwargs, priv, assistant);
    this.notifyStart(run.run_id, active);
    if (!kwargs.temporary) for (const w of this.threadWatchers.get(run.thread_id) ?? []) w(active);
    return active;
  }

  private async execute(active: ActiveRun, kwargs: RunKwargs, priv: RunPrivate, knownAssistant: Assistant | null): Promise<RunOutcome> {
    const { run, channel, abort } = active;
    const ctx = this.ctx;
    const stateful = !kwargs.temporary;
    let outcome: RunOutcome;
    let rollbackTo: string | null | undefined = undefined;
    let python: PythonGraph | null = null;
    const startedAt = new Date();
    channel.push("metadata", { run_id: run.run_id, attempt: kwargs.attempt ?? 1 });
    try {
      const assistant = knownAssistant ?? (await getAssistant(ctx, run.assistant_id, undefined, () => noAssistant(run.assistant_id)));
      const loaded = ctx.graphs.get(assistant.graph_id);
      if (!loaded) throw new Error(`graph "${assistant.graph_id}" is not part of this server`);
      const configurable: Record<string, unknown> = {
        ...kwargs.config.configurable,
        ...priv.configurable,
        run_id: run.run_id,
        thread_id: run.thread_id,
        graph_id: assistant.graph_id,
        assistant_id: assistant.assistant_id,
      };
      const { configurable: _c, tags, recursion_limit, ...restConfig } = kwargs.config;
      const runConfig: Record<string, unknown> = {
        ...restConfig,
        configurable,
        tags,
        recursionLimit: recursion_limit,
        context: kwargs.context,
        runId: run.run_id,
        // The LangGraph store, read by nodes as `config.store` or `getStore()`.
        store: ctx.store,
        metadata: {
          ...assistant.metadata,
          ...run.metadata,
          // Also written into each checkpoint's metadata (history filters by run).
          run_id: run.run_id,
          graph_id: assistant.graph_id,
          assistant_id: assistant.assistant_id,
          run_attempt: kwargs.attempt ?? 1,
          langgraph_version: LANGGRAPH_VERSION,
          langgraph_plan: "developer",
          langgraph_host: "self-hosted",
          langgraph_api_url: this.options.apiUrl?.(),
        },
      };
      if (isPythonGraph(loaded)) {
        // The Python worker executes and checkpoints; its events arrive serialised.
        python = loaded;
        outcome = await loaded.execute(kwargs, runConfig, channel, abort.signal, stateful);
      } else {
        const graph = await loaded.get({ configurable, context: kwargs.context }, stateful ? ctx.checkpointer.saver : null);
        if (stateful) {
          const tuple = await ctx.checkpointer.saver.getTuple({ configurable: { thread_id: run.thread_id, checkpoint_ns: "" } });
          rollbackTo = tuple?.config.configurable?.checkpoint_id ?? null;
        }
        outcome = await executeGraph(graph, kwargs, runConfig, channel, abort.signal, stateful);
      }
    } catch (err) {
      if (abort.signal.aborted) {
        const reason = String(abort.signal.reason ?? "interrupt");
        outcome = reason === "shutdown" ? { status: "error", threadStatus: "error", error: { error: "Error", message: "the agent server stopped during the run" } } : { status: "interrupted", threadStatus: "idle" };
      } else {
        const error = serializeError(err);
        ctx.log.warn({ err, runId: run.run_id }, "run failed before its graph started");
        channel.push("error", error);
        outcome = { status: "error", threadStatus: "error", values: { __error__: error }, error };
      }
    }
    if (outcome.error) ctx.log.info({ runId: run.run_id, error: outcome.error.message }, "run ended with an error");
    const rollback = abort.signal.aborted && abort.signal.reason === "rollback";
    if (rollback && python && stateful) {
      // The run's own checkpoints go; the JS saver below has none of this thread's.
      await python.deleteRunCheckpoints(run.thread_id, run.run_id).catch((err) => ctx.log.error({ err, runId: run.run_id }, "cannot roll back a Python run's checkpoints"));
    }
    try {
      await this.finish(run, outcome, stateful, rollback ? (rollbackTo ?? null) : undefined);
    } catch (err) {
      ctx.log.error({ err, runId: run.run_id }, "cannot record the end of a run");
    }
    channel.close();
    this.active.delete(run.run_id);
    this.retainEnded(active, kwargs.resumable ? RESUMABLE_KEEP_MS : ENDED_KEEP_MS);
    if (kwargs.webhook) void sendWebhook(ctx.log, kwargs.webhook, { ...run, status: outcome.status, values: outcome.values, error: outcome.error, run_started_at: startedAt.toISOString(), run_ended_at: nowIso() }, this.options.apiUrl?.());
    return outcome;
  }

  /**
   * Records the end of a run and, under the thread's lock, hands the thread to its next queued run
   * (claimed here and started at once) or sets the thread's status from the outcome.
   */
  private async finish(run: Run, outcome: RunOutcome, stateful: boolean, rollbackTo: string | null | undefined): Promise<void> {
    const ctx = this.ctx;
    if (!stateful) {
      await ctx.db.deleteFrom("agent_runs").where("run_id", "=", run.run_id).execute();
      return;
    }
    if (rollbackTo !== undefined) await deleteCheckpointsAfter(ctx, run.thread_id, rollbackTo);
    let threadValues: unknown = undefined;
    if (outcome.values !== undefined && !(outcome.values && typeof outcome.values === "object" && "__error__" in outcome.values)) {
      const { __interrupt__: _i, ...rest } = outcome.values as Record<string, unknown>;
      threadValues = rest;
    }
    const next = await ctx.db.transaction().execute(async (trx) => {
      await this.lockThread(trx, run.thread_id);
      if (rollbackTo !== undefined) await trx.deleteFrom("agent_runs").where("run_id", "=", run.run_id).execute();
      else await trx.updateTable("agent_runs").set({ status: outcome.status, updated_at: nowIso(), worker_id: null, lease_until: null }).where("run_id", "=", run.run_id).execute();
      const claimed = await this.claimNext(trx, run.thread_id);
      if (!claimed) {
        await setThreadOutcome(trx, run.thread_id, { status: outcome.threadStatus, values: threadValues, interrupts: outcome.interrupts ?? (rollbackTo !== undefined ? undefined : {}) });
      }
      return claimed;
    });
    if (next) this.startClaimed(next);
  }

  /** Claims the oldest queued run of a thread (caller holds the thread lock). */
  private async claimNext(trx: Kysely<Database>, threadId: string): Promise<AgentRunsTable | null> {
    let q = trx.selectFrom("agent_runs").selectAll().where("thread_id", "=", threadId).where("status", "=", "pending").where("created_at", "<=", nowIso()).orderBy("created_at").orderBy("run_id").limit(1);
    if (this.ctx.dialect === "postgres") q = q.forUpdate().skipLocked();
    const next = await q.executeTakeFirst();
    if (!next) return null;
    const claimed = await trx
      .updateTable("agent_runs")
      .set({ status: "running", worker_id: this.workerId, lease_until: this.leaseUntil(), updated_at: nowIso() })
      .where("run_id", "=", next.run_id)
      .where("status", "=", "pending")
      .executeTakeFirst();
    if (Number(claimed.numUpdatedRows) !== 1) return null;
    await trx.updateTable("agent_threads").set({ status: "busy", updated_at: nowIso() }).where("thread_id", "=", threadId).execute();
    return { ...next, status: "running" };
  }

  /** Starts a delayed (`after_seconds`) run when due; housekeeping does it if this process is gone by then. */
  private startLater(threadId: string, delayMs: number): void {
    const t = setTimeout(() => {
      if (this.stopping) return;
      void this.ctx.db
        .transaction()
        .execute(async (trx) => {
          await this.lockThread(trx, threadId);
          const running = await trx.selectFrom("agent_runs").select("run_id").where("thread_id", "=", threadId).where("status", "=", "running").executeTakeFirst();
          return running ? null : this.claimNext(trx, threadId);
        })
        .then((next) => next && this.startClaimed(next))
        .catch((err) => this.ctx.log.warn({ err, threadId }, "cannot start a delayed run; housekeeping retries"));
    }, delayMs + 5);
    t.unref();
  }

  private startClaimed(row: AgentRunsTable): void {
    const kwargs = parseJson<RunKwargs>(row.kwargs, {} as RunKwargs);
    this.launch(toRun(row), kwargs, this.unseal(row.run_id, kwargs), null);
  }

  /**
   * Cancels runs: a run executing here is aborted (`interrupt` keeps its checkpoints, `rollback`
   * removes them and the run); a queued one ends without starting.
   */
  async cancel(threadId: string, runIds: string[], action: CancelAction): Promise<void> {
    for (const runId of runIds) {
      const local = this.active.get(runId);
      if (local) {
        if (!local.abort.signal.aborted) local.abort.abort(action);
        continue;
      }
      this.privates.delete(runId);
      this.notifyStart(runId, null);
      // Running in another process: tell it (PostgreSQL NOTIFY); it records the end.
      const row = await this.ctx.db.selectFrom("agent_runs").select(["status", "worker_id"]).where("run_id", "=", runId).executeTakeFirst();
      if (row?.status === "running" && row.worker_id !== this.workerId) {
        await this.signals.cancel({ serverId: this.ctx.serverId, runId, action });
        continue;
      }
      const scope = { run: runId, server: this.ctx.serverId, thread: threadId };
      if (action === "rollback") {
        await this.ctx.db.deleteFrom("agent_runs").where("run_id", "=", scope.run).where("status", "=", "pending").where("server_id", "=", scope.server).where("thread_id", "=", scope.thread).execute();
      } else {
        await this.ctx.db
          .updateTable("agent_runs")
          .set({ status: "interrupted", updated_at: nowIso() })
          .where("run_id", "=", scope.run)
          .where("status", "=", "pending")
          .where("server_id", "=", scope.server)
          .where("thread_id", "=", scope.thread)
          .execute();
      }
      await this.idleIfNothingLeft(threadId);
    }
  }

  /** A queued run cancelled before it started leaves its thread `idle` when no other run is pending or running on it. */
  private async idleIfNothingLeft(threadId: string): Promise<void> {
    await this.ctx.db.transaction().execute(async (trx) => {
      await this.lockThread(trx, threadId);
      const left = await trx.selectFrom("agent_runs").select("run_id").where("thread_id", "=", threadId).where("status", "in", INFLIGHT).executeTakeFirst();
      if (!left) await trx.updateTable("agent_threads").set({ status: "idle", updated_at: nowIso() }).where("thread_id", "=", threadId).where("status", "=", "busy").execute();
    });
  }

  /** Listens for cancels sent by other processes (PostgreSQL). */
  async listen(): Promise<void> {
    this.signals = await openRunSignals(this.options.databaseUrl ?? null, this.ctx.log, (s) => {
      if (s.serverId !== this.ctx.serverId) return;
      const local = this.active.get(s.runId);
      if (local && !local.abort.signal.aborted) local.abort.abort(s.action);
    }, signalChannel(this.ctx.serverId, this.options.signalSecret));
  }

  /** Periodic housekeeping (one timer per process): renew our leases, end runs whose process died. */
  start(): void {
    const tick = () => {
      void this.housekeeping().catch((err) => this.ctx.log.warn({ err }, "agent run housekeeping failed"));
    };
    tick();
    this.timer = setInterval(tick, Math.max(200, Math.floor(this.options.leaseMs / 3)));
    this.timer.unref();
  }

  async housekeeping(): Promise<void> {
    await this.housekeeper.housekeeping();
  }

  /** At an `exclusive` start: settles every run another (dead) process left running. */
  async recoverAbandoned(): Promise<number> {
    return this.housekeeper.recoverAbandoned();
  }


  /** Stops: runs still executing end as errors (a restart must not leave them `running`). */
  async stop(graceMs = 2000): Promise<void> {
    this.stopping = true;
    this.stopped.abort();
    if (this.timer) clearInterval(this.timer);
    const running = [...this.active.values()];
    for (const a of running) a.abort.abort("shutdown");
    await Promise.race([Promise.allSettled(running.map((a) => a.done)), new Promise((r) => setTimeout(r, graceMs).unref())]);
    await this.signals.close();
  }
}

/** Removes the checkpoints a rolled-back run wrote (everything after the one it started from). */
async function deleteCheckpointsAfter(ctx: AgentServerContext, threadId: string, checkpointId: string | null): Promise<void> {
  if (checkpointId === null) {
    await ctx.checkpointer.saver.deleteThread(threadId);
    return;
  }
  await ctx.checkpointer.deleteAfter(threadId, checkpointId);
}
