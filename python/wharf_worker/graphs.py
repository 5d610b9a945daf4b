"""Imports a project's graphs once, the way ``langgraph.json`` names them.

``"./src/agent/graph.py:graph"`` (a file) or ``"pkg.mod:attr"`` (a module on ``sys.path``). The
value may be a compiled graph, a ``StateGraph`` (compiled here), or a factory of 0 or 1 argument
(the run's config), sync or async, returning a graph or a (sync or async) context manager of one;
a factory is called per request.
"""

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback

from langgraph.pregel import Pregel


class GraphLoadError(Exception):
    pass


def _is_builder(value) -> bool:
    return not isinstance(value, Pregel) and callable(getattr(value, "compile", None))


def import_ref(project_dir: str, ref: str):
    """``"./x.py:attr"`` or ``"pkg.mod:attr"`` → the attribute's value."""
    target, _, attr = ref.rpartition(":")
    if not target:
        target, attr = ref, "graph"
    if target.endswith(".py") or "/" in target or os.sep in target:
        path = os.path.normpath(os.path.join(project_dir, target))
        if not os.path.isfile(path):
            raise GraphLoadError(f"file not found: {path}")
        name = "wharf_user_" + os.path.relpath(path, project_dir).replace(os.sep, "_").replace(".", "_")
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            # Registered before executing, as a normal import is (dataclasses and pickling look it up).
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
    else:
        module = importlib.import_module(target)
    if not hasattr(module, attr):
        names = ", ".join(n for n in dir(module) if not n.startswith("_")) or "none"
        raise GraphLoadError(f"the module has no attribute {attr!r} (it has: {names})")
    return getattr(module, attr)


class LoadedGraph:
    """One graph of the project: a compiled graph, or a factory called per request."""

    def __init__(self, graph_id: str, value, where: str):
        self.graph_id = graph_id
        self.where = where
        self.compiled = None
        self.factory = None
        self._with_saver = {}
        if isinstance(value, Pregel):
            self.compiled = self._named(value)
        elif _is_builder(value):
            self.compiled = self._named(value.compile())
        elif callable(value):
            params = [p for p in inspect.signature(value).parameters.values() if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if len(params) > 1:
                raise GraphLoadError(f"{where}: a graph factory takes 0 or 1 argument (the config), this one takes {len(params)}")
            self.factory = value
            self._factory_args = len(params)
        else:
            raise GraphLoadError(f"{where} is not a LangGraph graph (expected a compiled graph, a StateGraph, or a function returning one); got {type(value).__name__}")

    def _named(self, graph):
        # The LangGraph server replaces the default name with the graph id.
        if getattr(graph, "name", None) in (None, "LangGraph"):
            graph = graph.copy(update={"name": self.graph_id})
        return graph

    @property
    def name(self) -> str:
        return self.compiled.name if self.compiled is not None else self.graph_id

    @contextlib.asynccontextmanager
    async def get(self, config: dict, checkpointer, store=None):
        """The graph for one request, persisted by ``checkpointer`` (None: stateless) whatever it was compiled with."""
        if self.compiled is not None:
            key = (id(checkpointer), id(store))
            graph = self._with_saver.get(key)
            if graph is None:
                graph = self.compiled.copy(update={"checkpointer": checkpointer, "store": store})
                self._with_saver[key] = graph
            yield graph
            return
        async with contextlib.AsyncExitStack() as stack:
            value = self.factory(config) if self._factory_args else self.factory()
            if inspect.isawaitable(value):
                value = await value
            if hasattr(value, "__aenter__"):
                value = await stack.enter_async_context(value)
            elif hasattr(value, "__enter__") and not isinstance(value, Pregel):
                value = stack.enter_context(value)
            if _is_builder(value):
                value = value.compile()
            if not isinstance(value, Pregel):
                raise GraphLoadError(f"{self.where}: the factory returned {type(value).__name__}, not a graph")
            yield self._named(value).copy(update={"checkpointer": checkpointer, "store": store})


def load_all(project_dir: str, specs: dict):
    """Every graph of the project; a graph that fails to import is reported, the others load."""
    loaded, errors = {}, {}
    for graph_id, ref in specs.items():
        where = f'graph "{graph_id}" ({ref})'
        try:
            loaded[graph_id] = LoadedGraph(graph_id, import_ref(project_dir, ref), where)
        except BaseException as err:  # noqa: BLE001 - a SystemExit at import is one graph's failure too
            tb = traceback.format_exception_only(type(err), err)[-1].strip()
            errors[graph_id] = {"module": ref, "error": tb}
    return loaded, errors
