"""The worker's checkpointer: the official saver for where the server keeps its data.

- the server on PostgreSQL: ``AsyncPostgresSaver`` on a connection pool, in the server's schema
  (``search_path``), the same tables the JavaScript saver uses (its migrations are the first five
  of the Python saver's, so both share them; thread ids never collide);
- otherwise ``AsyncSqliteSaver`` in its own file (WAL, so several workers share it);
- ``checkpointer.path`` of ``langgraph.json``: the project's own saver (an instance, an async or
  sync context manager, or a factory of one), as the LangGraph server takes it.

``checkpointer.serde`` (``allowed_json_modules``, ``allowed_msgpack_modules``, ``pickle_fallback``)
configures the serializer of the savers opened here.
"""

import contextlib
import inspect
import logging
import re

from langgraph.checkpoint.base import BaseCheckpointSaver

log = logging.getLogger("wharf_worker")


class CheckpointerError(Exception):
    pass


def serializer(serde: dict | None):
    """``checkpointer.serde`` → a ``JsonPlusSerializer``, or None for the library's default."""
    if not serde:
        return None
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    accepted = inspect.signature(JsonPlusSerializer).parameters
    kwargs = {}
    for key in ("pickle_fallback", "allowed_json_modules", "allowed_msgpack_modules"):
        if key not in serde:
            continue
        if key not in accepted:
            log.warning("checkpointer.serde.%s is not supported by the installed langgraph-checkpoint; ignored", key)
            continue
        value = serde[key]
        # JSON lists → the tuples of module paths the serializer expects.
        if isinstance(value, list):
            value = [tuple(v) if isinstance(v, list) else v for v in value]
        kwargs[key] = value
    return JsonPlusSerializer(**kwargs)


async def _enter(stack: contextlib.AsyncExitStack, value):
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, BaseCheckpointSaver):
        return value
    if hasattr(value, "__aenter__"):
        return await _enter(stack, await stack.enter_async_context(value))
    if hasattr(value, "__enter__"):
        return await _enter(stack, stack.enter_context(value))
    if callable(value):
        return await _enter(stack, value())
    raise CheckpointerError(f"checkpointer.path gave {type(value).__name__}, not a BaseCheckpointSaver (nor a context manager or factory of one)")


async def _postgres(stack: contextlib.AsyncExitStack, spec: dict, serde):
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if spec.get("schema"):
        # The saver's SQL names its tables unqualified: the schema comes from the search path.
        schema = spec["schema"]
        quoted = schema if re.fullmatch(r"[a-z_][a-z0-9_]*", schema) else '"' + schema.replace('"', '""') + '"'
        # libpq splits options on spaces unless escaped.
        kwargs["options"] = "-c search_path=" + quoted.replace("\\", "\\\\").replace(" ", "\\ ")
    pool = AsyncConnectionPool(spec["url"], min_size=1, max_size=spec.get("pool_size") or 5, kwargs=kwargs, open=False)
    await pool.open(wait=True, timeout=30)
    stack.push_async_callback(pool.close)
    saver = AsyncPostgresSaver(pool, serde=serde)
    await saver.setup()
    return saver


async def _sqlite(stack: contextlib.AsyncExitStack, spec: dict, serde):
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    # Autocommit: each statement commits in aiosqlite's thread. The saver otherwise commits with a
    # later call from the event loop, and a node blocking that loop (time.sleep in an async node)
    # would hold the file's write lock meanwhile, stalling the project's other workers.
    conn = await aiosqlite.connect(spec["path"], isolation_level=None)
    stack.push_async_callback(conn.close)
    # Several workers of one project write the same file.
    await conn.execute("PRAGMA journal_mode=WAL")
    await conn.execute("PRAGMA busy_timeout=30000")
    saver = AsyncSqliteSaver(conn, serde=serde)
    await saver.setup()
    return saver


async def open_saver(stack: contextlib.AsyncExitStack, spec: dict, load_ref) -> BaseCheckpointSaver:
    """The saver ``spec`` describes (``{kind: postgres|sqlite, url|path, schema, path_ref, serde}``), closed with ``stack``."""
    serde = serializer(spec.get("serde"))
    if spec.get("path_ref"):
        # The project's saver is used as it comes (its own serializer and setup).
        return await _enter(stack, load_ref(spec["path_ref"]))
    if spec["kind"] == "postgres":
        return await _postgres(stack, spec, serde)
    return await _sqlite(stack, spec, serde)


async def delete_run_checkpoints(saver, thread_id: str, run_id: str) -> bool:
    """Removes the checkpoints (and their writes) one run wrote on a thread; False for a saver whose tables are unknown."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if isinstance(saver, AsyncSqliteSaver):
        match = "thread_id = ? AND json_extract(CAST(metadata AS TEXT), '$.run_id') = ?"
        args = (thread_id, run_id)
        async with saver.lock:
            await saver.conn.execute(f"DELETE FROM writes WHERE thread_id = ? AND checkpoint_id IN (SELECT checkpoint_id FROM checkpoints WHERE {match})", (thread_id, *args))
            await saver.conn.execute(f"DELETE FROM checkpoints WHERE {match}", args)
            await saver.conn.commit()
        return True
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        AsyncPostgresSaver = None  # noqa: N806 - the PostgreSQL saver is optional for a project's own saver
    if AsyncPostgresSaver is not None and isinstance(saver, AsyncPostgresSaver):
        match = "thread_id = %s AND metadata->>'run_id' = %s"
        async with saver._cursor() as cur:
            await cur.execute(f"DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id IN (SELECT checkpoint_id FROM checkpoints WHERE {match})", (thread_id, thread_id, run_id))
            await cur.execute(f"DELETE FROM checkpoints WHERE {match}", (thread_id, run_id))
        return True
    log.warning("rollback: %s cannot delete one run's checkpoints; they are kept", type(saver).__name__)
    return False


async def prune_keep_latest(saver, thread_ids: list) -> bool:
    """``checkpointer.ttl`` with ``keep_latest``: each thread keeps only its latest checkpoint per
    namespace (the saver's own ``aprune`` where it has one; the SQLite saver's documented tables
    otherwise). False for a saver that can do neither."""
    with contextlib.suppress(NotImplementedError):
        await saver.aprune(thread_ids, strategy="keep_latest")
        return True
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    if not isinstance(saver, AsyncSqliteSaver):
        log.warning("checkpointer.ttl keep_latest: %s cannot prune; its checkpoints are kept", type(saver).__name__)
        return False
    # Checkpoint ids are time-ordered (uuid6): the greatest of a namespace is its latest. A SQLite
    # checkpoint row holds every channel's value, so the latest alone is the whole state.
    latest = "SELECT thread_id, checkpoint_ns, MAX(checkpoint_id) AS keep FROM checkpoints WHERE thread_id = ? GROUP BY thread_id, checkpoint_ns"
    async with saver.lock:
        for thread_id in thread_ids:
            for table in ("writes", "checkpoints"):
                await saver.conn.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id NOT IN (SELECT keep FROM ({latest}) k WHERE k.checkpoint_ns = {table}.checkpoint_ns)",
                    (thread_id, thread_id),
                )
        await saver.conn.commit()
    return True
