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


class FrameReader:
    def __init__(self, reader: asyncio.StreamReader):
        self._reader = reader

    async def read(self):
        """The next (header, body), or None at end of input (the server went away)."""
        try:
            (hlen,) = _LEN.unpack(await self._reader.readexactly(4))
            if hlen > MAX_FRAME:
                raise ValueError(f"frame header of {hlen} bytes")
            header = orjson.loads(await self._reader.readexactly(hlen))
            (blen,) = _LEN.unpack(await self._reader.readexactly(4))
            if blen > MAX_FRAME:
                raise ValueError(f"frame body of {blen} bytes")
            body = await self._reader.readexactly(blen) if blen else b""
        except asyncio.IncompleteReadError:
            return None
        return header, body


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


async def open_reader(fd: int) -> FrameReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_FRAME)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0))
    return FrameReader(reader)
