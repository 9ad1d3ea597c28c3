"""A client that sends a request's head a header at a time and never finishes it (a slowloris).

Used by the serve tests against the edge's header timeout (:mod:`nemo_genrm.serve.edge`), in
process and through a real service.
"""

from __future__ import annotations

import asyncio

__all__ = ["trickled_head"]


async def _everything(reader: asyncio.StreamReader) -> bytes:
    """All the server sends until it closes. Read while the head is still being sent: a close
    with the client's bytes unread makes the kernel reset the connection, and a reset loses
    what a read started after the sending would have gathered (seen on a loaded 2-core machine)."""
    data = b""
    try:
        while chunk := await reader.read(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


async def trickled_head(
    port: int, request_line: str, *, every_s: float, headers: int = 40, reply_timeout_s: float = 10.0
) -> bytes:
    """Open a connection to ``127.0.0.1:port``, send ``request_line`` and a ``Host`` header, then
    one more header every ``every_s`` seconds (``headers`` of them at most, never the blank line
    that ends the head), until the server answers or closes.

    Returns:
        What the server sent back (``b""``: it closed without a word).
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{request_line}\r\nHost: x\r\n".encode())
    reply = asyncio.ensure_future(_everything(reader))
    for i in range(headers):
        if reply.done():
            break
        try:
            writer.write(f"X-Slow-{i}: 1\r\n".encode())
            await writer.drain()
        except ConnectionError:
            break
        await asyncio.sleep(every_s)
    try:
        return await asyncio.wait_for(reply, reply_timeout_s)
    finally:
        writer.close()
