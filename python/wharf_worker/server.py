"""The worker's request loop: each request in its own task, replies as frames."""

import asyncio
import contextlib
import importlib.metadata
import sys
import uuid

from . import checkpointer, embed, frames, graphs, http_app, runs, state, warmup
from .auth import Denied, ProjectAuth, revive_user
from .schemas import graph_schemas
from .serde import dumps, error_dict, loads
from .store import RemoteStore


class RequestError(Exception):
    """A request the worker refuses: answered with its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _drawing(graph: dict) -> dict:
    """The drawable graph without the runnables' class paths (``data.id``), as the LangGraph server sends it."""
    for node in graph.get("nodes", []):
        if isinstance(node.get("data"), dict):
            node["data"] = {k: v for k, v in node["data"].items() if k != "id"}
    return graph


class Worker:
    def __init__(self, settings: dict):
        self.settings = settings
        self.graphs = {}
        self.saver = None
        self.tasks = {}
        # Drain controls of the runs in flight (`run.drain`), by run id.
        self.controls = {}
        self.out = None
        self.auth = None
        self.embedder = None
        self.http = None
        self.store = None
        self.calls = {}
        self.next_call = 0
        # The requests' tasks, once the worker has said hello; requests that arrive before (the
        # server waits for the hello) start right after it, and replies settle calls at once.
        self.pending = None
        self.early = []

    async def serve(self, in_fd: int, out_fd: int) -> None:
        self.out = frames.FrameWriter(out_fd)
        asyncio.get_running_loop().set_default_executor(frames.FlushingExecutor(self.out))
        closed = await frames.open_reader(in_fd, self._on_frame)
        self.store = RemoteStore(self.call, asyncio.get_running_loop())
        async with contextlib.AsyncExitStack() as stack:
            load_ref = lambda ref: graphs.import_ref(self.settings["project_dir"], ref)  # noqa: E731
            self.saver = await checkpointer.open_saver(stack, self.settings["checkpointer"], load_ref)
            state.stamp_thread_ids(self.saver)
            self.graphs, errors = graphs.load_all(self.settings["project_dir"], self.settings["graphs"])
            self.embedder, embed_error = None, None
            if self.settings.get("embed"):
                try:
                    self.embedder = embed.load(self.settings["embed"], load_ref)
                except BaseException as err:  # noqa: BLE001 - reported to the server, which decides
                    embed_error = f"{type(err).__name__}: {err}"
            self.http, http_error = None, None
            if self.settings.get("http_app"):
                try:
                    self.http = http_app.HttpApp(load_ref(self.settings["http_app"]), self.settings["http_app"])
                    # The app's lifespan starts before the worker says hello, so no request meets an app not ready.
                    await self.http.startup()
                    stack.push_async_callback(self.http.shutdown)
                except BaseException as err:  # noqa: BLE001 - reported to the server, which refuses to start
                    http_error = f"{type(err).__name__}: {err}"
            auth_info, auth_error = None, None
            if self.settings.get("auth"):
                try:
                    ref = self.settings["auth"]
                    self.auth = ProjectAuth(graphs.import_ref(self.settings["project_dir"], ref), ref)
                    auth_info = self.auth.describe()
                except BaseException as err:  # noqa: BLE001 - reported to the server, which refuses to start
                    auth_error = f"{type(err).__name__}: {err}"
            try:
                await warmup.warm_up(self.graphs, self.saver, self.store)
            except Exception as err:  # noqa: BLE001 - a warm-up is an optimisation: the worker serves without it
                print(f"warm-up skipped: {type(err).__name__}: {err}", file=sys.stderr)
            self.out.send(
                {"kind": "hello"},
                dumps({
                    "graphs": {gid: {"name": g.name} for gid, g in self.graphs.items()},
                    "errors": errors,
                    "auth": auth_info,
                    "auth_error": auth_error,
                    "embed_error": embed_error,
                    "http_error": http_error,
                    "versions": {"python": sys.version.split()[0], **{n: _version(n) for n in ("langgraph", "langchain-core", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres")}, "checkpointer": type(self.saver).__name__},
                }),
            )
            self.pending = set()
            for header, body in self.early:
                self._on_frame(header, body)
            self.early = None
            await closed
            # The server closed our input: it is stopping. Runs in flight end with it.
            for task in self.pending:
                task.cancel()

    def _on_frame(self, header: dict, body: bytes) -> None:
        """A frame from the server, as it arrives: a reply settles a call, a request starts its task."""
        if header.get("kind") in ("reply", "reply_error"):
            self._settle(header, body)
            return
        if self.pending is None:
            self.early.append((header, body))
            return
        task = asyncio.create_task(self.handle(header, body))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def call(self, op: str, payload):
        """A request to the agent server (the store); its reply settles the future."""
        self.next_call += 1
        cid = f"py-{self.next_call}"
        fut = asyncio.get_running_loop().create_future()
        self.calls[cid] = fut
        try:
            self.out.send({"id": cid, "kind": "call", "op": op}, dumps(payload))
            return await fut
        finally:
            self.calls.pop(cid, None)

    def _settle(self, header: dict, body: bytes) -> None:
        fut = self.calls.get(header["id"])
        if fut is None or fut.done():
            return
        if header["kind"] == "reply":
            fut.set_result(loads(body))
        else:
            fut.set_exception(RuntimeError(header.get("message", "the agent server refused the call")))

    def graph(self, graph_id: str) -> graphs.LoadedGraph:
        g = self.graphs.get(graph_id)
        if g is None:
            raise RequestError(404, f'Graph "{graph_id}" not found')
        return g

    async def handle(self, header: dict, body: bytes) -> None:
        rid, op = header["id"], header["op"]
        try:
            req = loads(body) or {}
            method = getattr(self, "op_" + op.replace(".", "_"), None)
            if method is None:
                raise RequestError(400, f"unknown operation {op!r}")
            result = await method(rid, req)
            extra, payload = result if isinstance(result, tuple) else ({}, dumps(result))
            self.out.send({"id": rid, "kind": "result", **extra}, payload)
        except asyncio.CancelledError:
            self.out.send({"id": rid, "kind": "cancelled"})
        except RequestError as err:
            self.out.send({"id": rid, "kind": "error", "status": err.status, **error_dict(err)})
        except Denied as err:
            self.out.send({"id": rid, "kind": "error", "status": err.status, "error": "HTTPException", "message": str(err), "headers": err.headers})
        except Exception as err:  # noqa: BLE001 - any failure of user code is the request's error
            self.out.send({"id": rid, "kind": "error", **error_dict(err)})

    def _run_config(self, req: dict) -> dict:
        cfg = dict(req.get("config") or {})
        cfg["run_id"] = uuid.UUID(req["run_id"])
        configurable = cfg.get("configurable") or {}
        # Graphs read the caller as an object (`.identity`, `runtime.server_info.user`), not a plain dict.
        for key in ("langgraph_auth_user", "service_auth_user"):
            if isinstance(configurable.get(key), dict):
                configurable = {**configurable, key: revive_user(configurable[key])}
        cfg["configurable"] = configurable
        return cfg

    async def op_run_start(self, rid, req):
        stateful = not req.get("temporary")
        config = self._run_config(req)
        loaded = self.graph(req["graph_id"])
        self.tasks[req["run_id"]] = asyncio.current_task()
        # Only a thread's run can be drained: it resumes from its checkpoint as the next attempt.
        control = runs.new_control() if stateful else None
        if control is not None:
            self.controls[req["run_id"]] = control
        try:
            async with loaded.get(config, self.saver if stateful else None, self.store) as graph:
                send = lambda event, data: self.out.send_soon({"id": rid, "kind": "event", "event": event}, data)  # noqa: E731
                try:
                    mapper = await runs.stream_run(graph, req, config, send, control)
                except asyncio.CancelledError:
                    raise
                except Exception as err:  # noqa: BLE001 - the graph's error is the run's outcome
                    if runs.is_drained(err):
                        return {"status": "drained"}, dumps({})
                    body = dumps(error_dict(err))
                    send("error", body)
                    return {"status": "error"}, body
                if control is not None and control.drain_requested and await runs.stopped_early(graph, config):
                    return {"status": "drained"}, dumps({})
                extra, body = await runs.outcome(graph, config, mapper, stateful)
                return {"status": "success", **extra}, body
        finally:
            self.tasks.pop(req["run_id"], None)
            self.controls.pop(req["run_id"], None)

    async def op_run_drain(self, rid, req):
        """Asks a run to stop at its next superstep boundary, its checkpoint saved (SIGTERM on a replica)."""
        control = self.controls.get(req["run_id"])
        if control is not None:
            control.request_drain("shutdown")
        return {"draining": control is not None}

    async def op_run_cancel(self, rid, req):
        task = self.tasks.get(req["run_id"])
        if task is not None:
            task.cancel()
        return {"cancelled": task is not None}

    async def op_state_get(self, rid, req):
        async with self.graph(req["graph_id"]).get(req.get("config") or {}, self.saver, self.store) as graph:
            s = await graph.aget_state(state.config_of(req["thread_id"], req.get("checkpoint")), subgraphs=bool(req.get("subgraphs")))
            return state.thread_state(s) if s.config else None

    async def op_state_history(self, rid, req):
        async with self.graph(req["graph_id"]).get(req.get("config") or {}, self.saver, self.store) as graph:
            before = req.get("before")
            before = {"configurable": {"checkpoint_id": before}} if isinstance(before, str) else {"configurable": before} if before else None
            out = []
            async for s in graph.aget_state_history(state.config_of(req["thread_id"], req.get("checkpoint")), limit=req.get("limit"), before=before, filter=req.get("filter")):
                out.append(state.thread_state(s))
            return out

    async def op_state_update(self, rid, req):
        async with self.graph(req["graph_id"]).get(req.get("config") or {}, self.saver, self.store) as graph:
            values = req.get("values")
            if req.get("command") is not None:
                values = runs.to_command(req["command"])
            try:
                # The graph id rides in configurable, so the new checkpoint's metadata names it (as a run's do).
                at = state.config_of(req["thread_id"], req.get("checkpoint"))
                at["configurable"]["graph_id"] = req["graph_id"]
                cfg = await graph.aupdate_state(at, values, as_node=req.get("as_node"))
            except (ValueError, KeyError, TypeError) as err:
                raise RequestError(400, str(err)) from err
            s = await graph.aget_state({"configurable": {"thread_id": req["thread_id"]}})
            return {"checkpoint": cfg["configurable"], "values": s.values, "next": list(s.next)}

    async def op_state_bulk_update(self, rid, req):
        async with self.graph(req["graph_id"]).get(req.get("config") or {}, self.saver, self.store) as graph:
            from langgraph.types import StateUpdate

            supersteps = [
                [StateUpdate(runs.to_command(u["command"]) if u.get("command") is not None else u.get("values"), u.get("as_node")) for u in step["updates"]]
                for step in req["supersteps"]
            ]
            try:
                await graph.abulk_update_state(state.config_of(req["thread_id"], None), supersteps)
            except (ValueError, KeyError, TypeError) as err:
                raise RequestError(400, str(err)) from err
            s = await graph.aget_state({"configurable": {"thread_id": req["thread_id"]}})
            return {"values": s.values, "next": list(s.next)}

    async def op_graph_draw(self, rid, req):
        async with self.graph(req["graph_id"]).get(req.get("config") or {}, None) as graph:
            xray = req.get("xray") or False
            drawable = await graph.aget_graph(req.get("config") or None, xray=xray)
            return _drawing(drawable.to_json())

    async def op_graph_schemas(self, rid, req):
        async with self.graph(req["graph_id"]).get(req.get("config") or {}, None) as graph:
            return graph_schemas(graph)

    async def op_graph_subgraphs(self, rid, req):
        async with self.graph(req["graph_id"]).get(req.get("config") or {}, None) as graph:
            out = {}
            async for ns, sub in graph.aget_subgraphs(namespace=req.get("namespace"), recurse=bool(req.get("recurse"))):
                out[ns] = graph_schemas(sub)
            return out

    async def op_http_match(self, rid, req):
        return {"match": self.http is not None and self.http.matches(req["method"], req["path"])}

    async def op_http_request(self, rid, req):
        if self.http is None:
            raise RequestError(404, "this project has no Python http.app")
        # Cancelled (`run.cancel` with this id) when the client goes away from a streamed response.
        key = req.get("run_id")
        if key:
            self.tasks[key] = asyncio.current_task()
        try:
            return await self.http.handle(req, lambda event, data: self.out.send({"id": rid, "kind": "event", "event": event}, data))
        finally:
            if key:
                self.tasks.pop(key, None)

    async def op_store_embed(self, rid, req):
        if self.embedder is None:
            raise RequestError(400, "this project has no store.index.embed in Python")
        return await self.embedder.embed(list(req["texts"]))

    async def op_auth_authenticate(self, rid, req):
        return await self.auth.authenticate(req)

    async def op_auth_authorize(self, rid, req):
        return await self.auth.authorize(req)

    async def op_checkpoints_delete_thread(self, rid, req):
        await self.saver.adelete_thread(req["thread_id"])
        return {"ok": True}

    async def op_checkpoints_prune(self, rid, req):
        ids = [str(t) for t in req["thread_ids"]]
        return {"pruned": len(ids) if await checkpointer.prune_keep_latest(self.saver, ids) else 0}

    async def op_checkpoints_delete_for_run(self, rid, req):
        with contextlib.suppress(NotImplementedError):
            await self.saver.adelete_for_runs([req["run_id"]])
            return {"ok": True}
        # The official savers without adelete_for_runs: langgraph writes the run's id into each
        # checkpoint's metadata, and the savers' tables are their documented schema.
        deleted = await checkpointer.delete_run_checkpoints(self.saver, req["thread_id"], req["run_id"])
        return {"ok": deleted}

    async def op_checkpoints_copy_thread(self, rid, req):
        with contextlib.suppress(NotImplementedError):
            await self.saver.acopy_thread(req["from"], req["to"])
            return {"ok": True}
        tuples = [t async for t in self.saver.alist({"configurable": {"thread_id": req["from"]}})]
        for t in reversed(tuples):
            ns = t.config["configurable"].get("checkpoint_ns", "")
            parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            cfg = {"configurable": {"thread_id": req["to"], "checkpoint_ns": ns, **({"checkpoint_id": parent} if parent else {})}}
            await self.saver.aput(cfg, t.checkpoint, t.metadata, t.checkpoint["channel_versions"])
            by_task = {}
            for task_id, channel, value in t.pending_writes or []:
                by_task.setdefault(task_id, []).append((channel, value))
            for task_id, writes in by_task.items():
                await self.saver.aput_writes({"configurable": {"thread_id": req["to"], "checkpoint_ns": ns, "checkpoint_id": t.checkpoint["id"]}}, writes, task_id)
        return {"ok": True}
