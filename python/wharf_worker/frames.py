"""Length-prefixed frames over two inherited pipes.

A frame is ``u32 header length | header (JSON) | u32 body length | body``, big-endian. The header
says what the frame is; the body is pre-serialised JSON that the TypeScript side writes to HTTP or
SSE without parsing. stdout/stderr stay log streams, so a graph's ``print()`` cannot corrupt this.
"""

import asyncio
import os
import struct

import orjson

_LEN = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024


def encode(header: dict, body: bytes = b"") -> bytes:
    h = orjson.dumps(header)
    return _LEN.pack(len(h)) + h + _LEN.pack(len(body)) + body


class FrameProtocol(asyncio.Protocol):
    """Splits the input into frames as it arrives and hands each to ``on_frame`` at once, in order:
    no coroutine per frame (a request used to take four awaited reads before its task started)."""

    def __init__(self, on_frame, closed: asyncio.Future):
        self._on_frame = on_frame
        self._closed = closed
        self._rest = b""

    def data_received(self, data: bytes) -> None:
        # Most chunks hold whole frames: parsed in place, only an incomplete tail is kept.
        buf = self._rest + data if self._rest else data
        pos, size = 0, len(buf)
        while size - pos >= 4:
            (hlen,) = _LEN.unpack_from(buf, pos)
            if hlen > MAX_FRAME:
                raise ValueError(f"frame header of {hlen} bytes")
            if size - pos < 8 + hlen:
                break
            (blen,) = _LEN.unpack_from(buf, pos + 4 + hlen)
            if blen > MAX_FRAME:
                raise ValueError(f"frame body of {blen} bytes")
            end = pos + 8 + hlen + blen
            if size < end:
                break
            header = orjson.loads(buf[pos + 4 : pos + 4 + hlen])
            body = buf[pos + 8 + hlen : end]
            pos = end
            self._on_frame(header, body)
        self._rest = buf[pos:] if pos < size else b""

    def eof_received(self):
        self._end(None)

    def connection_lost(self, exc) -> None:
        # A malformed frame ends the worker as it did before: the server restarts it.
        self._end(exc)

    def _end(self, exc) -> None:
        if self._closed.done():
            return
        if exc is None:
            self._closed.set_result(None)
        else:
            self._closed.set_exception(exc)


class FrameWriter:
    """Writes whole frames; one write call per frame, so frames of concurrent tasks never interleave."""

    def __init__(self, fd: int):
        self._fd = fd
        os.set_blocking(fd, True)

    def send(self, header: dict, body: bytes = b"") -> None:
        data = memoryview(encode(header, body))
        # A blocking pipe write: the server reads continuously, and ordering across tasks matters
        # more than never stalling the loop for the time a pipe buffer takes to drain.
        while data:
            n = os.write(self._fd, data)
            data = data[n:]


async def open_reader(fd: int, on_frame) -> asyncio.Future:
    """Reads frames from ``fd`` into ``on_frame(header, body)``; the future ends with the input
    (the server went away) or with the error that broke it."""
    loop = asyncio.get_running_loop()
    closed = loop.create_future()
    await loop.connect_read_pipe(lambda: FrameProtocol(on_frame, closed), os.fdopen(fd, "rb", buffering=0))
    return closed
