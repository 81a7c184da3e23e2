"""Test helpers: a dpgate server on an ephemeral loopback port, in a thread or a subprocess."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from dpgate.catalog.owner import Owner
from dpgate.server.serve import LoginGuard, Server

PASSWORD = "correct horse battery"
OWNER_PASSWORD = "owner staple 1234"


def add_logins(path: Path, analysts: list[str], owner: str | None = "boss") -> None:
    with Owner(path, create=False) as o:
        for name in analysts:
            o.set_login(name, password=PASSWORD)
        if owner:
            o.set_login(owner, password=OWNER_PASSWORD, owner=True)


def url(port: int, user: str, password: str | None = PASSWORD) -> str:
    auth = user if password is None else f"{user}:{password.replace(' ', '%20')}"
    return f"postgresql://{auth}@127.0.0.1:{port}/dpgate"


class ThreadServer:
    """``Server`` running its asyncio loop in a daemon thread of the test process."""

    def __init__(self, path: Path, **kw):
        kw.setdefault("guard", LoginGuard(delay=0.0))
        self.server = Server(str(path), port=0, **kw)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("server did not start")
        self.port = self.server.port

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start())
        self._ready.set()
        self.loop.run_forever()

    def url(self, user: str, password: str | None = PASSWORD) -> str:
        return url(self.port, user, password)

    def stop(self):
        async def shutdown():
            self.server._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(20)
        self.server.close()
        self.loop.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProcessServer:
    """``dpgate serve`` as a child process (for kill -9)."""

    def __init__(self, path: Path, port: int | None = None):
        self.path, self.port = path, port or free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dpgate", "serve", str(path), "--port", str(self.port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        line = self.proc.stdout.readline()
        if "dpgate serve:" not in line:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line}{self.proc.stdout.read()}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                break
            except OSError:
                time.sleep(0.05)

    def url(self, user: str, password: str | None = PASSWORD) -> str:
        return url(self.port, user, password)

    def kill(self):
        self.proc.kill()
        self.proc.wait(10)
        self.proc.stdout.close()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc.stdout.close()


def rss_mb() -> float:
    """This process's resident memory (the in-process server's), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def two_analysts(make_db) -> Path:
    """A protected table t (200 subjects, g in 0..4) and analysts alice and bob with logins."""
    path = make_db("CREATE TABLE t AS SELECT i AS uid, i % 5 AS g FROM range(200) r(i)",
                   protect={"t": {"unit": "uid", "epsilon": 100.0, "domains": {"g": [0, 1, 2, 3, 4]}}},
                   analysts={"alice": {"epsilon": 1.0}, "bob": {"epsilon": 1.0}}, allow_seed=False)  # fmt: skip
    add_logins(path, ["alice", "bob"])
    return path
