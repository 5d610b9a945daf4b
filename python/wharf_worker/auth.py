"""The project's ``langgraph_sdk.Auth``: authenticate with parameters injected by name, then
per-resource authorization, with the LangGraph server's dispatch order and results."""

import asyncio
import inspect
from collections.abc import Mapping
from urllib.parse import unquote

from langgraph_sdk import Auth

from .asgi import receiver

def _request(scope: dict, body: bytes):
    from starlette.requests import Request

    return Request(scope, receive=receiver(body))


def _query_params(scope: dict, body: bytes):
    from starlette.datastructures import QueryParams

    return QueryParams(scope["query_string"])


def _authorization(scope: dict, body: bytes):
    value = dict(scope["headers"]).get(b"authorization", b"")
    return value.decode("latin-1") or None


# How each parameter `authenticate` may ask for is made from the request's ASGI scope and body.
_ARGUMENTS = {
    "request": _request,
    "body": lambda scope, body: body,
    "user": lambda scope, body: None,
    "path": lambda scope, body: scope["path"],
    "method": lambda scope, body: scope["method"],
    "scopes": lambda scope, body: [],
    "path_params": lambda scope, body: scope["path_params"],
    "query_params": _query_params,
    "headers": lambda scope, body: dict(scope["headers"]),
    "authorization": _authorization,
    "scope": lambda scope, body: scope,
}
SUPPORTED = set(_ARGUMENTS)


class Denied(Exception):
    """An HTTP answer decided by a handler: status, detail, headers."""

    def __init__(self, status: int, detail: str, headers: Mapping | None = None):
        super().__init__(detail)
        self.status = status
        self.headers = dict(headers or {})


class User(dict):
    """A user as graphs and ``@auth.on`` handlers see it: ``user["k"]``, ``user.k``, ``.identity``,
    ``.dict()``, ``.model_dump()`` (the LangGraph server's ProxyUser behaviour) across the JSON hop."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def dict(self):
        return dict(self)

    def model_dump(self):
        return dict(self)


def revive_user(data):
    """JSON user → the object handlers and graphs get (a real ``StudioUser`` for Studio requests)."""
    if not isinstance(data, dict):
        return data
    if data.get("kind") == "StudioUser":
        return Auth.types.StudioUser(data.get("identity", "langgraph-studio-user"), is_authenticated=True)
    return User(data)


def _user_dict(user) -> dict:
    if isinstance(user, str):
        return {"identity": user}
    if isinstance(user, Mapping):
        if "identity" not in user:
            raise ValueError("the returned user has no 'identity'")
        return dict(user)
    if hasattr(user, "identity"):
        for dump in ("model_dump", "dict"):
            if callable(getattr(user, dump, None)):
                try:
                    return {**dump_attrs(user), **getattr(user, dump)()}
                except TypeError:
                    pass
        return dump_attrs(user)
    raise ValueError(f"authenticate returned {type(user).__name__}: expected a string, a dict with 'identity', or a user object")


def dump_attrs(user) -> dict:
    out = {"identity": user.identity}
    for k in ("display_name", "is_authenticated", "permissions"):
        if hasattr(user, k):
            out[k] = getattr(user, k)
    return out


def normalize(result) -> dict:
    """What ``authenticate`` returned → ``{user, permissions}`` as the LangGraph server normalises it."""
    if isinstance(result, tuple) and len(result) == 2:
        permissions, user = result
    elif isinstance(result, Mapping) and "permissions" in result:
        permissions, user = result["permissions"], result
    elif not isinstance(result, (str, Mapping)) and hasattr(result, "permissions"):
        permissions, user = result.permissions, result
    else:
        permissions, user = None, result
    u = _user_dict(user)
    perms = list(permissions or u.get("permissions") or [])
    u = {**u, "permissions": perms, "display_name": u.get("display_name") or u["identity"], "is_authenticated": u.get("is_authenticated", True)}
    return {"user": u, "permissions": perms}


class ProjectAuth:
    def __init__(self, auth: Auth, where: str):
        if not isinstance(auth, Auth):
            raise TypeError(f"auth {where} must be an instance of langgraph_sdk.Auth, not {type(auth).__name__}")
        self.auth = auth
        self.where = where
        fn = auth._authenticate_handler
        self.params = list(inspect.signature(fn).parameters) if fn else []
        self._is_async = inspect.iscoroutinefunction(fn)
        unknown = [p for p, v in (inspect.signature(fn).parameters.items() if fn else []) if p not in SUPPORTED and v.default is v.empty]
        if unknown:
            raise TypeError(f"auth {where}: authenticate asks for {', '.join(unknown)}; supported parameters: {', '.join(sorted(SUPPORTED))}")

    def describe(self) -> dict:
        keys = [f"{r}:{a}" for (r, a) in self.auth._handlers]
        if self.auth._global_handlers:
            keys.append("*:*")
        return {"authenticate": self.auth._authenticate_handler is not None, "params": self.params, "handlers": keys, "where": self.where}

    async def authenticate(self, req: dict) -> dict:
        raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in req["headers"]]
        scope = {
            "type": "http",
            "method": req["method"],
            "path": unquote(req["path"]),
            "raw_path": req["path"].encode(),
            "query_string": req.get("query", "").encode(),
            "headers": raw_headers,
            "path_params": req.get("path_params") or {},
            "client": None,
            "server": None,
            "scheme": "http",
        }
        body = (req.get("body") or "").encode()
        fn = self.auth._authenticate_handler
        # Only the parameters the handler asks for are built (this runs on every request).
        kwargs = {p: _ARGUMENTS[p](scope, body) for p in self.params if p in _ARGUMENTS}
        try:
            result = await fn(**kwargs) if self._is_async else await asyncio.to_thread(fn, **kwargs)
        except Auth.exceptions.HTTPException as err:
            raise Denied(err.status_code, err.detail, err.headers) from err
        return normalize(result)

    def _handler(self, resource: str, action: str):
        for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
            found = self.auth._handlers.get(key)
            if found:
                return found[-1]
        return self.auth._global_handlers[-1] if self.auth._global_handlers else None

    async def authorize(self, req: dict) -> dict:
        resource, action = req["event"].split(":", 1)
        value = req["value"]
        if resource == "store" and isinstance(value, dict) and isinstance(value.get("namespace"), list):
            value["namespace"] = tuple(value["namespace"])
        handler = self._handler(resource, action)
        if handler is None:
            return {"filters": None, "value": value}
        ctx = Auth.types.AuthContext(permissions=req.get("permissions") or [], user=revive_user(req["user"]), resource=resource, action=action)
        try:
            result = await handler(ctx=ctx, value=value)
        except Auth.exceptions.HTTPException as err:
            raise Denied(err.status_code, err.detail, err.headers) from err
        except AssertionError as err:
            raise Denied(403, str(err) or "Forbidden") from err
        if result is None or result is True:
            return {"filters": None, "value": value}
        if result is False:
            raise Denied(403, "Forbidden")
        if not isinstance(result, dict):
            raise TypeError(f"auth handler for {req['event']} returned {type(result).__name__}; expected a filter dict, None or a bool")
        return {"filters": result or None, "value": value}
