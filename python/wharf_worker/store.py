"""The LangGraph store as Python graphs see it (``runtime.store``, ``get_store()``): a ``BaseStore``
whose batches go to the agent server, which owns the store (``/store/*``, TTL, auth, embeddings)."""

import asyncio
from datetime import datetime

from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchItem, SearchOp


def op_to_json(op) -> dict:
    if isinstance(op, GetOp):
        return {"kind": "get", "namespace": list(op.namespace), "key": op.key, "refresh_ttl": op.refresh_ttl}
    if isinstance(op, PutOp):
        return {"kind": "put", "namespace": list(op.namespace), "key": op.key, "value": op.value, "index": op.index if op.index is not None else None}
    if isinstance(op, SearchOp):
        return {"kind": "search", "namespace_prefix": list(op.namespace_prefix), "filter": op.filter, "limit": op.limit, "offset": op.offset, "query": op.query}
    if isinstance(op, ListNamespacesOp):
        conds = [{"match_type": c.match_type, "path": list(c.path)} for c in (op.match_conditions or ())]
        return {"kind": "list", "match_conditions": conds, "max_depth": op.max_depth, "limit": op.limit, "offset": op.offset}
    raise TypeError(f"unknown store operation {type(op).__name__}")


def _item(d, search=False):
    if d is None:
        return None
    common = {"value": d["value"], "key": d["key"], "namespace": tuple(d["namespace"]), "created_at": datetime.fromisoformat(d["created_at"]), "updated_at": datetime.fromisoformat(d["updated_at"])}
    # Search results are SearchItems even unranked (score None), as langgraph's own stores return
    # them: graphs read `.score` (the memory-agent template does).
    return SearchItem(**common, score=d.get("score")) if search or "score" in d else Item(**common)


def result_from_json(op, r):
    if isinstance(op, GetOp):
        return _item(r)
    if isinstance(op, SearchOp):
        return [_item(i, search=True) for i in r]
    if isinstance(op, ListNamespacesOp):
        return [tuple(ns) for ns in r]
    return None


class RemoteStore(BaseStore):
    def __init__(self, call, loop: asyncio.AbstractEventLoop):
        self._call = call
        self._loop = loop

    async def abatch(self, ops):
        ops = list(ops)
        results = await self._call("store.batch", [op_to_json(op) for op in ops])
        return [result_from_json(op, r) for op, r in zip(ops, results)]

    def batch(self, ops):
        # Sync nodes run in worker threads: hand the batch to the loop and wait.
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()
