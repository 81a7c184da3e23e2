"""For the web tests: ``dpgate web`` on an ephemeral loopback port in a thread, and a small HTTP client."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

from dpgate.catalog.owner import Owner
from dpgate.server.guard import LoginGuard

PASSWORD = "correct horse battery"
OWNER_PASSWORD = "owner staple 1234"


def add_logins(path: Path, analysts: list[str], owner: str | None = "boss") -> None:
    with Owner(path, create=False) as o:
        for name in analysts:
            o.set_login(name, password=PASSWORD)
        if owner:
            o.set_login(owner, password=OWNER_PASSWORD, owner=True)


def analysts_db(make_db, setup: str) -> Path:
    """``setup``'s table ``t`` (uid, g in 0..4, x in [0, 50]) protected, analysts alice and bob
    (ε 1 each) with logins, and the owner's login."""
    path = make_db(setup, protect={"t": {"unit": "uid", "epsilon": 100.0, "domains": {"g": [0, 1, 2, 3, 4]},
                                         "bounds": {"x": (0, 50)}}},
                   analysts={"alice": {"epsilon": 1.0}, "bob": {"epsilon": 1.0}}, allow_seed=False)  # fmt: skip
    add_logins(path, ["alice", "bob"])
    return path


class ThreadWeb:
    """``dpgate web`` (``dpgate.web.serve.Running``) with its event loop in a daemon thread."""

    def __init__(self, path: Path, **kw: Any):
        from dpgate.web.serve import Running

        kw.setdefault("guard", LoginGuard(delay=0.0))
        self.running = Running(str(path), host="127.0.0.1", port=0, **kw)
        self.web, self.port = self.running.web, self.running.port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.running.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("dpgate web did not start")
            time.sleep(0.02)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.running.serve())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def client(self) -> Client:
        return Client(self.port)

    def stop(self) -> None:
        self.running.stop()
        self.thread.join(30)
        self.loop.close()


class Client:
    """One browser's worth of state (its cookie and CSRF token) over http.client, as the page sends
    requests: JSON, with its Origin and the token."""

    def __init__(self, port: int):
        self.port = port
        self.cookie: str | None = None
        self.csrf: str | None = None
        self.origin = f"http://127.0.0.1:{port}"

    def request(self, method: str, path: str, body: Any = None, *, headers: dict | None = None,
                raw: Any = None, chunked: bool = False) -> tuple[int, Any, http.client.HTTPResponse]:  # fmt: skip
        con = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            h = {"Host": f"127.0.0.1:{self.port}"}
            if method != "GET":
                h.update({"Origin": self.origin, "Content-Type": "application/json"})
                if self.csrf:
                    h["X-CSRF-Token"] = self.csrf
            if self.cookie:
                h["Cookie"] = self.cookie
            h.update(headers or {})
            h = {k: v for k, v in h.items() if v is not None}
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            con.request(method, path, body=data, headers=h, encode_chunked=chunked)
            response = con.getresponse()
            text = response.read()
            try:
                payload = json.loads(text) if text else None
            except ValueError:
                payload = text.decode("utf-8", "replace")
            return response.status, payload, response
        finally:
            con.close()

    def login(self, name: str, password: str = PASSWORD) -> tuple[int, Any]:
        status, data, response = self.request("POST", "/api/login", {"name": name, "password": password})
        if status == 200:
            self.cookie = response.getheader("set-cookie").split(";", 1)[0]
            self.csrf = data["csrf"]
        return status, data

    def query(self, sql: str) -> tuple[int, Any]:
        status, data, _ = self.request("POST", "/api/query", {"sql": sql})
        return status, data

    def get(self, path: str) -> tuple[int, Any]:
        status, data, _ = self.request("GET", path)
        return status, data
