"""Test helpers: a PostgreSQL client on raw sockets, bound to a chosen loopback source address.

libpq cannot choose its source address; hostile clients in the load tests do (127.0.0.N), so they
speak the protocol themselves: a SCRAM-SHA-256 login, a simple query, an idle socket.
"""

from __future__ import annotations

import base64
import secrets
import socket
import struct
import time

from dpgate import scram


def connect(port: int, source: str | None = None, timeout: float = 30.0) -> socket.socket:
    """A TCP connection to the server on loopback, from ``source`` (e.g. 127.0.0.7) when given."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if source is not None:
        s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def startup(user: str) -> bytes:
    body = struct.pack("!i", 196608) + b"user\x00" + user.encode() + b"\x00database\x00dpgate\x00\x00"
    return struct.pack("!i", len(body) + 4) + body


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def read_message(s: socket.socket) -> tuple[bytes, bytes]:
    head = _recv_exactly(s, 5)
    n = struct.unpack("!i", head[1:])[0]
    return head[:1], _recv_exactly(s, n - 4)


def error_text(payload: bytes) -> str:
    """The message (M) field of an ErrorResponse, with its detail (D) when there is one."""
    fields = {f[:1]: f[1:].decode("utf-8", "replace") for f in payload.split(b"\x00") if f}
    return fields.get(b"M", "") + (f" [{fields[b'D']}]" if b"D" in fields else "")


def login(port: int, user: str, password: str, *, source: str | None = None, timeout: float = 30.0,
          keep: bool = False) -> tuple[str, float, socket.socket | None]:  # fmt: skip
    """Log in with SCRAM: ("ok" | "failed" | "error: ..." | "closed", seconds, the socket when ``keep``
    and logged in). "failed" is a wrong password's answer; "closed" a connection ended without one."""
    start = time.monotonic()
    s = None
    try:
        s = connect(port, source, timeout)
        s.sendall(startup(user))
        kind, payload = read_message(s)
        if kind == b"E":
            return "error: " + error_text(payload), time.monotonic() - start, None
        nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        bare = f"n=,r={nonce}"
        first = ("n,," + bare).encode()
        body = b"SCRAM-SHA-256\x00" + struct.pack("!i", len(first)) + first
        s.sendall(b"p" + struct.pack("!i", len(body) + 4) + body)
        kind, payload = read_message(s)
        if kind == b"E":
            return "error: " + error_text(payload), time.monotonic() - start, None
        server_first = payload[4:].decode()
        without = f"c=biws,r={server_first.split(',')[0][2:]}"
        proof = scram.client_proof(password, bare, server_first, without)
        final = f"{without},p={proof}".encode()
        s.sendall(b"p" + struct.pack("!i", len(final) + 4) + final)
        while True:
            kind, payload = read_message(s)
            if kind == b"E":
                text = error_text(payload)
                verdict = "failed" if "password authentication failed" in text else "error: " + text
                return verdict, time.monotonic() - start, None
            if kind == b"Z":
                out = s if keep else None
                if not keep:
                    s.sendall(b"X\x00\x00\x00\x04")
                s = None if keep else s
                return "ok", time.monotonic() - start, out
    except (ConnectionError, OSError):
        return "closed", time.monotonic() - start, None
    finally:
        if s is not None:
            s.close()


def query(s: socket.socket, sql: str) -> None:
    """Send a simple query (and read nothing)."""
    body = sql.encode() + b"\x00"
    s.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)


def read_until_ready(s: socket.socket) -> tuple[int, str | None]:
    """Read a simple query's answer: (data rows, the error's text or None)."""
    rows, err = 0, None
    while True:
        kind, payload = read_message(s)
        if kind == b"D":
            rows += 1
        elif kind == b"E":
            err = error_text(payload)
        elif kind == b"Z":
            return rows, err
