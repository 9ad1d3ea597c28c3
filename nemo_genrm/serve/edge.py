"""The service's network edge: what clients connect to, in front of Ray Serve's HTTP proxy.

Ray Serve's proxy (uvicorn) waits for ever on a connection whose request headers arrive slowly,
and it answers its own routes (``/-/routes``, ``/-/healthz``) to anyone, with no key. So Ray
Serve's proxy listens on ``127.0.0.1`` only (``serve.proxy_port``), and clients reach it through
:class:`Edge`, which listens on ``serve.host:serve.port`` and, for each request:

- closes the connection with a 408 when its request line and headers are not all in within
  ``serve.header_timeout_s`` of the connection's start, and with a 431 when they pass
  :data:`MAX_HEAD_BYTES`;
- answers 404 to Ray Serve's own routes (``/-/...``): they stay on the machine;
- forwards the request to the proxy with the client's address in :data:`CLIENT_HEADER` (any such
  header the client sent is dropped first: the replica counts requests per client by it), then
  relays the body and the reply unchanged but for its ``connection: close``: a connection
  carries one request, so every request passes the checks above (HTTP clients open the next
  connection themselves).

The request's body and its time limit (``serve.body_timeout_s``) are the replica's
(:mod:`nemo_genrm.serve.guard`). The edge parses request heads with h11, keeps no state between
connections, and runs on the node of each proxy as a Ray actor (:class:`EdgeActor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit

import h11

__all__ = [
    "CLIENT_HEADER",
    "LINGER_S",
    "MAX_HEAD_BYTES",
    "Edge",
    "EdgeActor",
    "edge_name",
    "edge_nodes",
    "start_edges",
    "stop_edges",
]

logger = logging.getLogger(__name__)

CLIENT_HEADER = "x-genrm-client"
"""The header in which the edge tells the replica the client's address."""
MAX_HEAD_BYTES = 64 * 1024
"""Largest request line and headers accepted (else 431)."""
_CHUNK = 64 * 1024
LINGER_S = 5.0
"""How long the edge drops what a client still sends after its reply (so the client reads it)."""


class Edge:
    """An HTTP/1.1 edge on ``host:port`` in front of a proxy on ``127.0.0.1:upstream_port``.

    Args:
        host: Address to listen on (``serve.host``).
        port: Port to listen on (``serve.port``).
        upstream_port: Ray Serve's proxy port on this machine (``serve.proxy_port``).
        header_timeout_s: Longest time for a request's line and headers (``serve.header_timeout_s``).
    """

    def __init__(self, host: str, port: int, upstream_port: int, header_timeout_s: float):
        self.host, self.port, self.upstream_port = host, port, upstream_port
        self.header_timeout_s = header_timeout_s
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()  # handlers still serving (or lingering)
        self._stopping = False
        self.closed_slow_heads = 0  # connections cut for headers slower than the timeout

    async def start(self) -> None:
        """Listen (raises ``OSError`` when the port is taken)."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEAD_BYTES)

    async def stop(self) -> None:
        """Stop listening, end the connections still open and close the server."""
        if self._server is not None:
            self._server.close()
            # A closed server still runs its handlers (up to LINGER_S after a reply): they end
            # here, not as tasks the loop destroys pending.
            self._stopping = True
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("unknown", 0)
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        try:
            await self._one_request(reader, writer, str(peer[0]))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except RuntimeError:
            # uvloop (Ray Serve's loop) raises RuntimeError on a write to a transport the client
            # has closed, where asyncio's own loop does nothing: a client gone is no error.
            if not writer.is_closing():
                raise
        except asyncio.CancelledError:
            # Cancelled by stop(): the handler ends as a finished task (Python 3.11's stream
            # callback reports a cancelled handler as an error).
            if not self._stopping:
                raise
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str) -> None:
        """Check the connection's request and forward it (a connection carries one request)."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.header_timeout_s)
        except TimeoutError:
            self.closed_slow_heads += 1
            await _reply(
                writer,
                408,
                f"the request's headers did not arrive within {self.header_timeout_s:g} s (serve.header_timeout_s)",
                "header_timeout",
            )
            return
        except asyncio.LimitOverrunError:
            await _reply(
                writer, 431, f"the request's headers are larger than {MAX_HEAD_BYTES} bytes", "headers_too_large"
            )
            return
        except asyncio.IncompleteReadError:
            return  # the client closed before its headers were in
        request = _parse_head(head)
        if request is None:
            await _reply(writer, 400, "the request line or headers are not valid HTTP/1.1", "invalid_http")
            return
        if _serve_internal(request.target):  # Ray Serve's own routes stay on the machine
            await _reply(writer, 404, "not found", "not_found")
            return
        await self._forward(request, reader, writer, client)

    async def _forward(
        self, request: h11.Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: str
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            await _reply(writer, 502, "the judge service's proxy is not reachable on this node", "proxy_unavailable")
            return
        # The request goes as the client sent it (keep-alive: a proxy asked to close would reset
        # a connection whose body it did not read, and its early reply would be lost with it).
        headers = [(name, value) for name, value in request.headers if name != CLIENT_HEADER.encode()]
        upstream = h11.Connection(h11.CLIENT)
        up_writer.write(
            upstream.send(
                h11.Request(
                    method=request.method,
                    target=request.target,
                    headers=[*headers, (CLIENT_HEADER.encode(), client.encode())],
                )
            )
        )
        body = asyncio.ensure_future(_pipe(reader, up_writer))
        try:
            await _relay_reply(upstream, up_reader, writer)
        finally:
            body.cancel()
            with contextlib.suppress(BaseException):
                await body
            up_writer.close()
        # A reply may come before the body is all sent (a 413 read from Content-Length): closing
        # on a body still arriving would reset the connection and lose the reply, so the edge
        # says it is done writing and drops what the client still sends, for a while.
        if writer.is_closing():  # the client is gone: nothing to say or drain
            return
        with contextlib.suppress(asyncio.TimeoutError, ConnectionError, OSError):
            if writer.can_write_eof():
                writer.write_eof()
            await asyncio.wait_for(_discard(reader), LINGER_S)


async def _relay_reply(upstream: h11.Connection, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Relay the proxy's reply (informational ones first) until it is whole, its final head
    saying ``connection: close``; h11 reads where the reply ends, the bytes pass unchanged."""
    while True:
        head = await source.readuntil(b"\r\n\r\n")
        upstream.receive_data(head)
        event = upstream.next_event()
        if isinstance(event, h11.InformationalResponse):  # 100 Continue: passed on as it is
            sink.write(head)
            continue
        if not isinstance(event, h11.Response):
            raise ConnectionError(f"the proxy's reply is not HTTP: {event!r}")
        status, *lines = head.decode("latin-1").split("\r\n")
        kept = [
            line for line in lines if line and line.split(":", 1)[0].strip().lower() not in ("connection", "keep-alive")
        ]
        sink.write(("\r\n".join([status, *kept, "connection: close"]) + "\r\n\r\n").encode("latin-1"))
        break
    while (event := upstream.next_event()) is not h11.PAUSED and not isinstance(event, h11.EndOfMessage):
        if event is h11.NEED_DATA:
            data = await source.read(_CHUNK)
            if not data:
                return  # the proxy closed: its reply ends here
            upstream.receive_data(data)
            sink.write(data)
            await sink.drain()
    await sink.drain()


def _serve_internal(target: bytes) -> bool:
    """Whether a request target names one of Ray Serve's own routes (``/-/...``), however spelled.

    The proxy routes on the percent-decoded path, so ``/%2D/routes`` is ``/-/routes`` to it; an
    absolute target (``http://host/-/routes``) and repeated slashes are read the same way.
    """
    text = target.decode("latin-1")
    if not text.startswith("/"):  # absolute form
        text = urlsplit(text).path
    path = unquote(text.split("?", 1)[0].split("#", 1)[0])
    return re.sub("/+", "/", path).startswith("/-/")


def _parse_head(head: bytes) -> h11.Request | None:
    incoming = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    incoming.receive_data(head)
    try:
        event = incoming.next_event()
    except h11.RemoteProtocolError:
        return None
    return event if isinstance(event, h11.Request) else None


async def _discard(source: asyncio.StreamReader) -> None:
    while await source.read(_CHUNK):
        pass


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    while data := await source.read(_CHUNK):
        sink.write(data)
        await sink.drain()


async def _reply(writer: asyncio.StreamWriter, status: int, message: str, code: str) -> None:
    """An OpenAI-style error reply; the connection is closed after it."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


def edge_name(host: str, port: int, node_id: str) -> str:
    """The Ray actor name of the edge on ``node_id`` for ``host:port``."""
    return f"genrm-edge-{host}-{port}-{node_id[:16]}"


class EdgeActor:
    """:class:`Edge` in a Ray actor (async, no CPU), pinned to the node of a Ray Serve proxy."""

    async def start(self, host: str, port: int, upstream_port: int, header_timeout_s: float) -> str:
        """Listen; returns ``host:port`` (raises ``OSError`` when the port is taken on the node)."""
        self.edge = Edge(host, port, upstream_port, header_timeout_s)
        await self.edge.start()
        return f"{host}:{port}"

    async def stats(self) -> dict[str, Any]:
        """What the edge refused (connections cut for slow headers)."""
        return {"closed_slow_heads": self.edge.closed_slow_heads}

    async def stop(self) -> None:
        """Stop listening."""
        await self.edge.stop()


def edge_nodes(proxy_location: str) -> list[str]:
    """The nodes (hex ids) whose Ray Serve proxy gets an edge: the head, or every alive node."""
    import ray

    alive = [n for n in ray.nodes() if n.get("Alive")]
    if proxy_location == "HeadOnly":
        alive = [n for n in alive if "node:__internal_head__" in (n.get("Resources") or {})]
    return [n["NodeID"] for n in alive]


def start_edges(
    host: str, port: int, proxy_port: int, header_timeout_s: float, proxy_location: str, namespace: str
) -> list[str]:
    """An edge on each proxy node for ``host:port`` (those running already are kept).

    Returns:
        The nodes (hex ids) with an edge.

    Raises:
        ConfigError: ``port`` is taken on a node.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from nemo_genrm.config import ConfigError
    from nemo_genrm.ray_runtime import actor_options

    remote = ray.remote(EdgeActor)
    nodes = edge_nodes(proxy_location)
    started = {}
    for node in nodes:
        name = edge_name(host, port, node)
        try:
            ray.get_actor(name, namespace=namespace)
            continue  # another service on this port started it
        except ValueError:
            pass
        actor = remote.options(
            **actor_options(
                num_cpus=0,
                name=name,
                namespace=namespace,
                lifetime="detached",
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            )
        ).remote()
        started[node] = (actor, actor.start.remote(host, port, proxy_port, header_timeout_s))
    taken = []
    for node, (actor, ref) in started.items():
        try:
            ray.get(ref, timeout=120)
        except Exception as exc:  # noqa: BLE001 - the port is taken there: named below
            ray.kill(actor)
            taken.append(f"node {node[:12]}: {type(exc).__name__}: {str(exc).splitlines()[-1] if str(exc) else ''}")
    if taken:
        stop_edges(host, port, namespace)
        raise ConfigError(
            [
                f"the judge service cannot listen on {host}:{port} (serve.host, serve.port): "
                + "; ".join(taken)
                + "; choose a free serve.port"
            ]
        )
    return nodes


def stop_edges(host: str | None, port: int | None, namespace: str) -> None:
    """Stop the edges for ``host:port`` (every edge when both are ``None``)."""
    import ray

    prefix = "genrm-edge-" if host is None else edge_name(host, port or 0, "")
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] == namespace and entry["name"].startswith(prefix):
            with contextlib.suppress(Exception):
                ray.kill(ray.get_actor(entry["name"], namespace=namespace))
