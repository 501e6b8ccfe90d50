"""Opens N TLS keep-alive connections to the gateway as the `valid` PSP, sends one request on
each, reads its answer, and holds them all open and idle until stdin closes. Prints how many
are open, and fails if any answer was not 200. Used by benches/idle.sh."""

import asyncio
import ssl
import sys

HOST, PORT, N, CERT, KEY = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
REQUEST = b"GET /v1/accounts HTTP/1.1\r\nHost: localhost\r\n\r\n"


async def one(ctx, gate, held):
    async with gate:
        reader, writer = await asyncio.open_connection(HOST, PORT, ssl=ctx, server_hostname="localhost")
        writer.write(REQUEST)
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        await reader.readexactly(length)
        if status != b"200":
            raise RuntimeError(f"answer {status!r}")
        held.append(writer)


async def main():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(CERT, KEY)
    gate = asyncio.Semaphore(64)
    held = []
    await asyncio.gather(*(one(ctx, gate, held) for _ in range(N)))
    print(f"open {len(held)}", flush=True)
    # Hold them until told to stop (stdin closes).
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for w in held:
        w.close()


asyncio.run(main())
