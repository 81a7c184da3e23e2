"""Who is at the other end of a loopback connection: the local user that owns the client's socket.

On a loopback listener every client has a loopback address, so addresses cannot tell a
colleague from a stranger on the same machine. The kernel can: Linux's sock_diag netlink
interface (what ``ss`` uses) finds the client's socket by its four addresses and ports and says
which uid owns it. One lookup is one netlink round trip (about 15 µs), made once a connection.
A local user then counts as an address group of its own (``dpgate.server.guard``), so another
user's guesses, idle sockets and failures do not take its pre-login slots or its turns; a user
rotating 127.x.y.z source addresses is still one group. Elsewhere (not Linux, no netlink, a
sandbox that forbids it) the answer is None and all of loopback is one group.

A client socket its process has already closed (an orphan: the client sent its request and hung
up before the server looked) has no owner any more: the kernel reports it as root's, with no
inode. Its uid is unknown, not 0: otherwise any local user could put connections, and their
failed logins, in root's group by closing each socket right after writing to it.
"""

from __future__ import annotations

import socket
import struct

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NO_COOKIE = 0xFFFFFFFF
_UID_AT = 16 + 4 + 48 + 12  # nlmsghdr, then inet_diag_msg: 4 bytes, its sockid, expires / rqueue / wqueue


def _address(family: int, host: str) -> bytes:
    raw = socket.inet_pton(family, host)
    return raw + b"\x00" * (16 - len(raw))


def loopback_uid(local: tuple, peer: tuple) -> int | None:
    """The uid owning the TCP socket at ``peer`` that is connected to ``local`` (ours), or None."""
    try:
        family = socket.AF_INET6 if ":" in peer[0] else socket.AF_INET
        sockid = (struct.pack("!HH", peer[1], local[1]) + _address(family, peer[0]) + _address(family, local[0])
                  + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE))  # fmt: skip
        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
        header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as s:
            s.settimeout(0.5)
            s.sendto(header + request, (0, 0))
            data = s.recv(8192)
        length, kind = struct.unpack_from("=IH", data)
        if kind != _SOCK_DIAG_BY_FAMILY or length < _UID_AT + 8 or len(data) < _UID_AT + 8:
            return None  # an error message (the socket is gone) or something unexpected
        uid, inode = struct.unpack_from("=II", data, _UID_AT)
        return uid if inode else None  # no inode: closed by its process, whose user the kernel no longer says
    except (OSError, AttributeError, ValueError, IndexError, struct.error):  # no AF_NETLINK here, or refused
        return None
