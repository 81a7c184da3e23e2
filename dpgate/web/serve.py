"""Listening and running ``dpgate web`` (uvicorn, one process, one event loop).

The server binds its socket itself, so a port in use or an address that is not this machine's is
refused with DP720 before anything runs. Passwords travel in the sign-in request, so an address
other than loopback needs TLS (``--tls-cert`` and ``--tls-key``; DP728 otherwise): put a proxy
that terminates TLS in front of a loopback listener, or give the certificate here.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from dpgate import errors

#: A request head larger than this is refused by h11 (as a startup packet is by dpgate serve).
MAX_HEAD = 16 * 1024


def _listen(host: str, port: int) -> socket.socket:
    if not host:
        raise errors.OperationalError("dpgate web needs an address to listen on (--host is empty)", code="DP720",
                                      hint="--host 127.0.0.1 (this machine only)")  # fmt: skip
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(info[4])
            sock.listen(512)
        except BaseException:
            sock.close()
            raise
    except (OSError, OverflowError, UnicodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise errors.OperationalError(
            f"dpgate web cannot listen on {host}:{port}: {reason}", code="DP720",
            hint="choose another --port (1024-65535 needs no privileges; 0 picks a free one) or an address of "
            "this machine for --host",
        ) from None  # fmt: skip
    sock.setblocking(False)
    return sock


def needs_tls(host: str, tls_cert: str | None) -> None:
    from dpgate.web.app import _loopback

    if not _loopback(host) and not tls_cert:
        raise errors.ProgrammingError(
            f"dpgate web on {host} would receive passwords unencrypted", code="DP728",
            hint="give --tls-cert and --tls-key, or listen on 127.0.0.1 behind a proxy that terminates TLS",
        )  # fmt: skip


class Running:
    """A ``WebServer`` and its uvicorn server on a bound socket (``port`` is the real one)."""

    def __init__(self, path: str, *, host: str = "127.0.0.1", port: int = 8765, tls_cert: str | None = None,
                 tls_key: str | None = None, **kw: Any):  # fmt: skip
        try:
            import uvicorn  # noqa: F401
            import starlette  # noqa: F401
        except ImportError:
            raise errors.InterfaceError(
                "dpgate web needs Starlette and uvicorn, which it does not have here", code="DP727",
                hint="pip install 'dpgate[web]'",
            ) from None  # fmt: skip
        import uvicorn

        from dpgate.web.app import WebServer

        if bool(tls_cert) != bool(tls_key):
            raise errors.ProgrammingError("TLS needs both --tls-cert and --tls-key", code="DP710")
        needs_tls(host, tls_cert)
        if tls_cert:
            from dpgate.server.serve import tls_context

            tls_context(tls_cert, tls_key)  # a certificate that cannot be used is refused here (DP721)
        self.web = WebServer(path, host=host, port=port, tls=bool(tls_cert), **kw)
        try:
            self.socket = _listen(host, port)
        except BaseException:
            self.web.close()
            raise
        self.host, self.port = host, self.socket.getsockname()[1]
        self.web.port = self.port
        limits = self.web.connections.limits
        config = uvicorn.Config(
            self.web.app, http=self.web.connections.protocol(), ws="none", lifespan="on", loop="asyncio",
            log_level="warning", access_log=False, proxy_headers=False, server_header=False,
            timeout_keep_alive=int(max(1, limits.idle_timeout)), h11_max_incomplete_event_size=MAX_HEAD,
            ssl_certfile=tls_cert, ssl_keyfile=tls_key, timeout_graceful_shutdown=5,
        )  # fmt: skip
        self.server = uvicorn.Server(config)

    @property
    def url(self) -> str:
        scheme = "https" if self.web.tls else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}/"

    async def serve(self) -> None:
        try:
            await self.server.serve(sockets=[self.socket])
        finally:
            self.web.close()

    def stop(self) -> None:
        self.server.should_exit = True


def run(path: str, *, ready: Any = None, **kw: Any) -> None:
    """Serve until interrupted (SIGINT / SIGTERM: uvicorn stops gracefully); ``ready(running)`` is
    called once the socket is bound."""
    running = Running(path, **kw)
    if ready is not None:
        ready(running)
    asyncio.run(running.serve())
