"""Length-prefixed frames over two inherited pipes.

A frame is ``u32 header length | header (JSON) | u32 body length | body``, big-endian. The header
says what the frame is; the body is pre-serialised JSON that the TypeScript side writes to HTTP or
SSE without parsing. stdout/stderr stay log streams, so a graph's ``print()`` cannot corrupt this.
"""

import asyncio
import os
import struct
from concurrent.futures import ThreadPoolExecutor

import orjson

_LEN = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024
# How many turns of the event loop a held frame waits at most (see `FrameWriter.send_soon`): a
# stateless run's result follows its last event three turns later (langgraph's loop exit and its
# callbacks' end each run as a task of their own).
HOLD_TURNS = 4


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
        # Frames of `send_soon` not written yet (encoded), and whether their flush is scheduled.
        self._held = []
        self._flush_scheduled = False

    def send(self, header: dict, body: bytes = b"") -> None:
        data = encode(header, body)
        if self._held:
            # Held frames go first, in the same write: order is kept and the server wakes once.
            self._held.append(data)
            data = b"".join(self._held)
            self._held = []
        self._write(data)

    def send_soon(self, header: dict, body: bytes = b"") -> None:
        """A frame written with the next frame sent, or after a few turns of the event loop,
        whichever comes first: a run's last event then leaves with its result in one write, so the
        server wakes once for both (waking a process asleep in epoll is most of a small frame's
        cost). While an async node waits, the loop is idle and its turns take microseconds; a sync
        node's thread starts after a `flush` (see `FlushingExecutor`): an event is not held for a
        node's time."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # Not on the loop's thread: written now.
            self.send(header, body)
            return
        self._held.append(encode(header, body))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush, loop, HOLD_TURNS)

    def _flush(self, loop, turns: int) -> None:
        if turns > 1 and self._held:
            loop.call_soon(self._flush, loop, turns - 1)
            return
        self._flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Writes the held frames now."""
        if self._held:
            data = b"".join(self._held)
            self._held = []
            self._write(data)

    def _write(self, data: bytes) -> None:
        data = memoryview(data)
        # A blocking pipe write: the server reads continuously, and ordering across tasks matters
        # more than never stalling the loop for the time a pipe buffer takes to drain.
        while data:
            n = os.write(self._fd, data)
            data = data[n:]


class FlushingExecutor(ThreadPoolExecutor):
    """The event loop's default executor (sync nodes, ``asyncio.to_thread``): the frames held by
    ``writer`` are written before a function starts in a thread, which may hold the GIL for long
    (the loop would turn only between its switch intervals)."""

    def __init__(self, writer: FrameWriter):
        super().__init__(thread_name_prefix="asyncio")
        self._writer = writer

    def submit(self, fn, /, *args, **kwargs):
        self._writer.flush()
        return super().submit(fn, *args, **kwargs)


async def open_reader(fd: int, on_frame) -> asyncio.Future:
    """Reads frames from ``fd`` into ``on_frame(header, body)``; the future ends with the input
    (the server went away) or with the error that broke it."""
    loop = asyncio.get_running_loop()
    closed = loop.create_future()
    await loop.connect_read_pipe(lambda: FrameProtocol(on_frame, closed), os.fdopen(fd, "rb", buffering=0))
    return closed
