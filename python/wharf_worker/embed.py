"""``store.index.embed`` computed in Python: the project's function (``./embed.py:embed``,
``pkg.mod:fn``; sync or async, ``list[str] -> list[list[float]]``), an ``Embeddings`` object, or a
provider string (``openai:text-embedding-3-small``) resolved with LangChain's ``init_embeddings``,
as the LangGraph server takes them. The agent server owns the store and calls ``embed`` for puts
and searches."""

import asyncio
import inspect
import os


class Embedder:
    def __init__(self, value, where: str):
        self.where = where
        self._async = None
        self._sync = None
        if hasattr(value, "aembed_documents"):
            self._async = value.aembed_documents
        elif hasattr(value, "embed_documents"):
            self._sync = value.embed_documents
        elif inspect.iscoroutinefunction(value):
            self._async = value
        elif callable(value):
            self._sync = value
        else:
            raise TypeError(f"store.index.embed {where} is {type(value).__name__}: expected a function of a list of texts, or an Embeddings object")

    async def embed(self, texts: list) -> list:
        if self._async is not None:
            out = await self._async(texts)
        else:
            # A sync function (often network I/O) must not stall the worker's other runs.
            out = await asyncio.to_thread(self._sync, texts)
            if inspect.isawaitable(out):
                out = await out
        return [[float(x) for x in v] for v in out]


def _is_file_ref(ref: str) -> bool:
    target = ref.rpartition(":")[0]
    return ref.startswith(".") or os.path.isabs(ref) or target.endswith(".py")


def load(ref: str, import_ref) -> Embedder:
    """The embedder ``ref`` names: a file or module attribute first, else a provider model."""
    if _is_file_ref(ref):
        return Embedder(import_ref(ref), ref)
    try:
        return Embedder(import_ref(ref), ref)
    except Exception as err:  # noqa: BLE001 - not importable: then it names a provider
        module_error = err
    try:
        from langchain.embeddings import init_embeddings
    except ImportError as err:
        raise RuntimeError(f"{ref!r} is neither an importable function ({module_error}) nor usable as a provider model: install the `langchain` package for provider strings") from err
    return Embedder(init_embeddings(ref), ref)
