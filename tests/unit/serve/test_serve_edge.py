"""The service's edge closes slow-header connections, keeps Ray Serve's routes off the network, and
forwards everything else with the client's address, over real sockets.

The upstream stands in for Ray Serve's proxy: uvicorn (the server Ray Serve's proxy runs) with
an app that answers every request with what it received (its line, headers and body length),
and refuses a large body from its Content-Length without reading it, as the replica does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from nemo_genrm.serve.edge import CLIENT_HEADER, Edge
from nemo_genrm.testing.slow_client import trickled_head

HEADER_TIMEOUT_S = 0.5


def _app(seen: list) -> Any:
    """What the proxy stands in for: every request's line, headers and body size, as JSON."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo(request: Any) -> JSONResponse:
        line = f"{request.method} {request.url.path} HTTP/1.1"
        seen.append(line)
        if request.url.path == "/early" and int(request.headers.get("content-length", 0)) > 1024:
            return JSONResponse({"error": "too large"}, status_code=413)  # from Content-Length, body unread
        body = await request.body()
        return JSONResponse({"line": line, "headers": dict(request.headers), "body": len(body)})

    return Starlette(routes=[Route("/{path:path}", echo, methods=["GET", "POST"])])


async def _edge(seen: list, upstream: bool = True) -> tuple[Edge, Any]:
    """An edge on a free port, in front of the stand-in proxy (uvicorn, as Ray Serve's is)."""
    import uvicorn

    server, port = None, 1
    if upstream:
        server = uvicorn.Server(
            uvicorn.Config(_app(seen), host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        )
        server.task = asyncio.ensure_future(server.serve())
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
    edge = Edge("127.0.0.1", 0, port, HEADER_TIMEOUT_S)
    await edge.start()
    edge.port = edge._server.sockets[0].getsockname()[1]
    return edge, server


async def _stop(edge: Edge, server: Any) -> None:
    await edge.stop()
    if server is not None:
        server.should_exit = True
        await server.task


async def _raw(port: int, data: bytes, *, wait_s: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), wait_s)
    finally:
        writer.close()


def test_connections_whose_headers_trickle_in_are_answered_408_and_closed():
    async def run() -> tuple[list[bytes], float, list]:
        seen: list = []
        edge, server = await _edge(seen)
        start = time.monotonic()

        # A header every 0.2 s, each in time, the whole head never (8 s unless cut).
        head = "POST /v1/chat/completions HTTP/1.1"
        replies = await asyncio.gather(
            *(trickled_head(edge.port, head, every_s=0.2, reply_timeout_s=5) for _ in range(50))
        )
        took = time.monotonic() - start
        await _stop(edge, server)
        return replies, took, seen

    replies, took, seen = asyncio.run(run())
    assert all(r.startswith(b"HTTP/1.1 408") and b"header_timeout" in r for r in replies), replies[0]
    # Cut at the timeout (uncut, the heads would trickle for 8 s), nothing forwarded.
    assert took < HEADER_TIMEOUT_S + 5.0 and seen == []


@pytest.mark.parametrize("target", ["/-/routes", "/-/healthz", "/%2D/routes", "//-/healthz", "http://h/-/routes"])
def test_ray_serves_own_routes_are_not_served_to_the_network(target):
    async def run() -> tuple[bytes, list]:
        seen: list = []
        edge, server = await _edge(seen)
        reply = await _raw(edge.port, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await _stop(edge, server)
        return reply, seen

    reply, seen = asyncio.run(run())
    assert reply.startswith(b"HTTP/1.1 404") and seen == []


def test_requests_are_forwarded_with_the_clients_address_and_a_forged_one_is_dropped():
    async def run() -> tuple[list[httpx.Response], list]:
        seen: list = []
        edge, server = await _edge(seen)
        base = f"http://127.0.0.1:{edge.port}"
        async with httpx.AsyncClient(timeout=10) as client:
            replies = [
                await client.post(
                    f"{base}/v1/chat/completions",
                    json={"messages": []},
                    headers={CLIENT_HEADER: "10.9.9.9", "Authorization": "Bearer k"},
                )
                for _ in range(3)
            ]  # one connection each: the client reconnects by itself
            replies.append(await client.get(f"{base}/health"))
        await _stop(edge, server)
        return replies, seen

    replies, seen = asyncio.run(run())
    assert [r.status_code for r in replies] == [200] * 4
    sent = replies[0].json()
    assert sent["line"] == "POST /v1/chat/completions HTTP/1.1" and sent["body"] == len(b'{"messages":[]}')
    assert sent["headers"][CLIENT_HEADER] == "127.0.0.1"  # the edge's word, not the client's
    assert sent["headers"]["authorization"] == "Bearer k"
    assert replies[0].headers["connection"] == "close" and len(seen) == 4


def test_a_proxy_that_is_not_there_is_a_502_and_garbage_a_400():
    async def run() -> tuple[bytes, bytes]:
        edge, _ = await _edge([], upstream=False)
        down = await _raw(edge.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        garbage = await _raw(edge.port, b"\x16\x03\x01 not http at all\r\n\r\n")
        await _stop(edge, None)
        return down, garbage

    down, garbage = asyncio.run(run())
    assert down.startswith(b"HTTP/1.1 502") and garbage.startswith(b"HTTP/1.1 400")


def test_a_reply_before_the_whole_body_reaches_the_client():
    # A 413 from Content-Length while the client still sends 20 MB: the client gets the 413,
    # not a connection reset.
    async def run() -> int:
        edge, server = await _edge([])
        async with httpx.AsyncClient(timeout=30) as client:
            reply = await client.post(f"http://127.0.0.1:{edge.port}/early", content=b"a" * (20 * 1024 * 1024))
        await _stop(edge, server)
        return reply.status_code

    assert asyncio.run(run()) == 413


def test_clients_gone_before_the_edge_is_done_leave_no_unhandled_error():
    # Clients that reset their connection before the reply, or once its head is in, under uvloop
    # (Ray Serve's loop, where writing to a transport the peer closed raises instead of doing
    # nothing): the edge forgets each such connection quietly, and keeps serving.
    import socket
    import struct

    import uvloop

    async def run() -> tuple[list[dict], int]:
        errors: list[dict] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        edge, server = await _edge([])
        for i in range(40):
            reader, writer = await asyncio.open_connection("127.0.0.1", edge.port)
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            if i % 2:
                await reader.readuntil(b"\r\n\r\n")
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = reset
            writer.close()
        await asyncio.sleep(0.2)
        async with httpx.AsyncClient(timeout=10) as client:
            status = (await client.get(f"http://127.0.0.1:{edge.port}/health")).status_code
        await _stop(edge, server)
        return errors, status

    errors, status = uvloop.run(run())
    assert errors == [] and status == 200
