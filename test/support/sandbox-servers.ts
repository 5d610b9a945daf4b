// Small servers tests start inside a sandbox (Python, from the base image): what a user's service
// would be behind a service URL.

/** A WebSocket echo server on 127.0.0.1:8765 ("echo: " + each text frame), standard library only. */
export const WS_ECHO = `import asyncio, base64, hashlib
async def serve(r, w):
    head = (await r.readuntil(b"\\r\\n\\r\\n")).decode()
    key = [l.split(":", 1)[1].strip() for l in head.split("\\r\\n") if l.lower().startswith("sec-websocket-key:")][0]
    acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    w.write(("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + acc + "\\r\\n\\r\\n").encode())
    while True:
        b0, b1 = await r.readexactly(2)
        n = b1 & 127
        if n == 126: n = int.from_bytes(await r.readexactly(2), "big")
        mask = await r.readexactly(4)
        data = bytes(c ^ mask[i % 4] for i, c in enumerate(await r.readexactly(n)))
        if b0 & 15 == 8: break
        out = b"echo: " + data
        w.write(bytes([0x81, len(out)]) + out)
        await w.drain()
    w.close()
async def main():
    s = await asyncio.start_server(serve, "127.0.0.1", 8765)
    await s.serve_forever()
asyncio.run(main())
`;
