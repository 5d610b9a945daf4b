"""Warms the worker before it says hello, so the first request after a start (``wharf dev``, a
deploy, a restart) costs what the others do: langgraph and langchain-core import some modules on a
graph's first run and build some of their own structures then. A graph of the worker's own runs
once, stateless, through the same path as a run (no user code runs, nothing is stored), and each
project graph gets its per-saver copy made ahead."""

import importlib

from langchain_core.messages import AIMessage
from langgraph.graph import MessagesState, StateGraph

from . import runs

# Imported by langchain-core on the first run of a graph (tracing context, message coercion).
FIRST_RUN_MODULES = (
    "langchain_core.prompt_values",
    "langchain_core.tracers.context",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
)


def _reply(state: MessagesState):
    return {"messages": [AIMessage("warm")]}


async def warm_up(graphs: dict, saver, store) -> None:
    for name in FIRST_RUN_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            # Another langchain-core moved it: the first run imports whatever it needs then.
            pass
    own = StateGraph(MessagesState).add_node("reply", _reply).add_edge("__start__", "reply").compile()
    req = {"input": {"messages": [{"role": "human", "content": "warm"}]}, "stream_mode": ["values", "updates", "messages-tuple"], "temporary": True}
    mapper = await runs.stream_run(own, req, {"configurable": {}}, lambda event, body: None)
    await runs.outcome(own, {"configurable": {}}, mapper, False)
    for loaded in graphs.values():
        if loaded.compiled is not None:
            # The copies a run and a stateless run use, kept by the loaded graph.
            for cp in (saver, None):
                async with loaded.get({}, cp, store):
                    pass
