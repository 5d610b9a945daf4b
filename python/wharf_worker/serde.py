"""JSON as the LangGraph server writes it: orjson with a ``default`` that uses the libraries' own
``model_dump`` (so message and interrupt shapes follow the installed langchain-core/langgraph)."""

import base64
import dataclasses
import decimal
import ipaddress
import pathlib
import uuid
from collections import deque
from enum import Enum

import orjson

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _default(obj):
    if hasattr(obj, "model_dump") and callable(obj.model_dump):
        return obj.model_dump()
    if hasattr(obj, "dict") and callable(obj.dict) and not isinstance(obj, type):
        try:
            return obj.dict()
        except TypeError:
            pass
    if hasattr(obj, "_asdict") and callable(obj._asdict):
        return obj._asdict()
    if isinstance(obj, BaseException):
        return {"error": type(obj).__name__, "message": str(obj)}
    if isinstance(obj, (set, frozenset, deque)):
        return list(obj)
    if isinstance(obj, (uuid.UUID, pathlib.PurePath, ipaddress._IPAddressBase)):
        return str(obj)
    if isinstance(obj, decimal.Decimal):
        return int(obj) if obj == obj.to_integral_value() else float(obj)
    if isinstance(obj, (bytes, bytearray)):
        return base64.b64encode(obj).decode()
    if isinstance(obj, Enum):
        return obj.value
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, type):
        return repr(obj)
    return None


def dumps(value) -> bytes:
    out = orjson.dumps(value, default=_default, option=_OPTIONS)
    # The Python server strips NUL characters (PostgreSQL text cannot hold them).
    return out.replace(b"\\u0000", b"") if b"\\u0000" in out else out


def loads(data: bytes):
    return orjson.loads(data) if data else None


def error_dict(err: BaseException) -> dict:
    return {"error": type(err).__name__, "message": str(err)}
