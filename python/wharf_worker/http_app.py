"""``http.app``: the project's ASGI app (FastAPI, Starlette), called in-process for the requests its
routes match. The agent server asks ``matches`` once per method and path, then forwards matching
requests whole; the app's own middleware wraps them, as it does under the LangGraph server."""

import asyncio
import base64
import contextlib
import sys
from urllib.parse import unquote

import orjson

from .asgi import receiver


class HttpAppError(Exception):
    pass


class HttpApp:
    def __init__(self, app, where: str):
        if not callable(app) or not hasattr(app, "routes"):
            raise HttpAppError(f"http.app {where} is {type(app).__name__}: expected a Starlette or FastAPI app (an ASGI app with routes)")
        self.app = app
        self.where = where
        # The lifespan's state (what it yields), copied into each request's scope.
        self.state: dict = {}

    def matches(self, method: str, path: str) -> bool:
        from starlette.routing import Match

        scope = {"type": "http", "method": method, "path": unquote(path), "root_path": "", "headers": [], "query_string": b""}
        # A path the app knows with another method is the app's too (it answers 405), as Starlette routes it.
        return any(route.matches(scope)[0] != Match.NONE for route in self.app.routes)

    async def handle(self, req: dict, send_event) -> tuple:
        """Calls the app; its response start and each body chunk go out as they come
        (``send_event(event, bytes)``: ``start`` with the status and headers, then ``body``), so a
        streamed response reaches the client while the app still writes it."""
        path = req["path"]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": req["method"],
            "scheme": "http",
            "path": unquote(path),
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": (req.get("query") or "").encode(),
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in req["headers"]],
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 80),
            # What the app's lifespan yielded, as uvicorn gives each request a shallow copy.
            "state": dict(self.state),
        }
        body = base64.b64decode(req["body"]) if req.get("body") else b""
        done = asyncio.Event()
        receive = receiver(body, done)
        started = False

        async def send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in message.get("headers", [])]
                send_event("start", orjson.dumps({"status": message["status"], "headers": headers}))
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if chunk:
                    send_event("body", bytes(chunk))
                if not message.get("more_body", False):
                    done.set()

        try:
            await self.app(scope, receive, send)
        except Exception:
            # Starlette answers 500 and then re-raises for the server's logs: the answer stands.
            if not started:
                raise
            import traceback

            traceback.print_exc()
        finally:
            done.set()
        if not started:
            raise HttpAppError(f"http.app {self.where} sent no response for {req['method']} {path}")
        return {"streamed": True}, b""

    async def startup(self) -> None:
        """Runs the app's lifespan up to its startup (``lifespan.startup``), as uvicorn's ``lifespan="auto"``
        does: an app that does not speak the lifespan protocol is served without one; one that fails
        its startup fails the worker's start."""
        loop = asyncio.get_running_loop()
        self._to_app: asyncio.Queue = asyncio.Queue()
        self._started = loop.create_future()
        self._stopped = loop.create_future()
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}

        async def send(message):
            kind = message["type"]
            fut = self._started if kind.startswith("lifespan.startup") else self._stopped
            if not fut.done():
                fut.set_result(message)

        async def run():
            try:
                await self.app(scope, self._to_app.get, send)
            except Exception as err:  # noqa: BLE001 - an app without lifespan support raises here
                if not self._started.done():
                    self._started.set_exception(err)
            finally:
                # Returned without a word: no lifespan either.
                if not self._started.done():
                    self._started.set_exception(HttpAppError("the app returned from its lifespan"))
                if not self._stopped.done():
                    self._stopped.set_result(None)

        self._lifespan = asyncio.create_task(run())
        await self._to_app.put({"type": "lifespan.startup"})
        try:
            message = await self._started
        except Exception as err:  # noqa: BLE001 - no lifespan support: served without one, as uvicorn does
            self._lifespan = None
            print(f"http.app {self.where}: no lifespan ({type(err).__name__}: {err})", file=sys.stderr)
            return
        if message["type"] == "lifespan.startup.failed":
            raise HttpAppError(f"http.app {self.where}: lifespan startup failed: {message.get('message', '')}")

    async def shutdown(self) -> None:
        """The lifespan's shutdown (``lifespan.shutdown``), waited for a few seconds."""
        if getattr(self, "_lifespan", None) is None:
            return
        await self._to_app.put({"type": "lifespan.shutdown"})
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._stopped), timeout=5)
