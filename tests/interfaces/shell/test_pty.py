"""`dpgate shell` as a real process under a pseudo-terminal, and with a script piped in."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def read_until(fd: int, needle: bytes, timeout: float = 60.0) -> bytes:
    """Read the terminal until ``needle`` shows up, answering cursor-position requests like a terminal."""
    buf = b""
    end = time.monotonic() + timeout
    while needle not in buf and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            if b"\x1b[6n" in chunk:
                os.write(fd, b"\x1b[1;1R")
            buf += chunk
    return buf


def _shell_in_a_pty(demo_db, columns: int, env: dict):
    """The shell on a pseudo-terminal of 40 rows and ``columns`` columns: (its process, the master fd)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpgate", "shell", str(demo_db), "--analyst", "demo"],
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    return proc, master


def test_shell_under_a_pty(demo_db, tmp_path):
    env = dict(os.environ, TERM="xterm", XDG_DATA_HOME=str(tmp_path / "xdg"), COLUMNS="160", LINES="40")
    proc, master = _shell_in_a_pty(demo_db, 160, env)
    try:
        screen = read_until(master, b"demo>")
        screen += read_until(master, b"session \xce\xb5 0.1", timeout=10)
        assert b"dpgate shell" in screen
        assert b"\xce\xb5 left 10" in screen  # the bottom toolbar shows the budget
        os.write(master, b"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.2) COUNT(*) AS people FROM adult;\r")
        screen = read_until(master, b"remaining \xce\xb5 9.8")
        assert b"people" in screen and b"\xce\xb5 charged 0.2" in screen
        os.write(master, b".quit\r")
        proc.wait(timeout=60)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    history = tmp_path / "xdg" / "dpgate" / "history"
    assert history.exists() and "COUNT(*) AS people" in history.read_text()
    assert not (Path(demo_db).parent / "history").exists()


def test_piped_script_runs_without_prompts(demo_db, tmp_path):
    script = (EXAMPLES / "shell_walkthrough.sql").read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "dpgate", "shell", str(demo_db), "--analyst", "demo"],
        input=script, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg")),
    )  # fmt: skip
    out = proc.stdout
    assert "demo>" not in out and "dpgate shell —" not in out
    assert out.count("ε charged") >= 2  # (CSV output carries no status line)
    assert "| education" in out and "ci_half_width" in out and "analyst demo" in out
    assert "error DP211" in proc.stderr  # the walkthrough shows one refusal
    assert proc.returncode == 1  # ... so the script's exit status reports it


def test_the_shell_fits_the_terminal_it_runs_in(demo_db, tmp_path):
    """No COLUMNS: the width comes from the terminal itself (prompt-toolkit's output asks it)."""
    import re

    from dpgate.interfaces.fit import display_width

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm", XDG_DATA_HOME=str(tmp_path / "xdg"))
    proc, master = _shell_in_a_pty(demo_db, 80, env)
    try:
        read_until(master, b"demo>")
        os.write(master, b"SHOW BUDGET;\r")
        screen = read_until(master, b"24 rows")
        os.write(master, b".quit\r")
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode("utf-8", "replace")).replace("\r", "")
    table = [line for line in text.split("\n") if line.startswith(("|", "+-"))]
    assert len(table) > 30 and "| scope" in text
    assert max(display_width(line) for line in table) <= 80
