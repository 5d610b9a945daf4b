"""The benchmark's echo graph, its node stamping when it runs (see sitecustomize.py)."""

import builtins
import time

from langchain_core.messages import AIMessage
from langgraph.graph import MessagesState, StateGraph


def echo(state: MessagesState):
    trace = getattr(builtins, "__wharf_trace__", None)
    if trace is not None:
        trace.append(("py: node runs (executor thread)", time.monotonic_ns()))
    return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}


graph = StateGraph(MessagesState).add_node(echo).add_edge("__start__", "echo").compile()
