"""Running lancens as on a terminal: one of its streams on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_terminal(*args: str, stream: str = "stderr", columns: int = 120) -> tuple[int, str, str]:
    """Run `lancens` with `stream` ("stdout" or "stderr") on a pseudo-terminal and the other
    on a pipe: (exit code, stdout, stderr), the terminal's text as received."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": str(columns), "LANCE_LOG": "error"}
    env.pop("NO_COLOR", None)
    tty_out = stream == "stdout"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lancens_cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave if tty_out else subprocess.PIPE,
        stderr=subprocess.PIPE if tty_out else slave,
        env=env,
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    piped = (proc.stderr if tty_out else proc.stdout).read().decode()
    code = proc.wait(timeout=120)
    terminal = seen.decode(errors="replace")
    return (code, terminal, piped) if tty_out else (code, piped, terminal)


def shown(text: str) -> str:
    """What a terminal displays of `text`, without colour and cursor codes."""
    return _ANSI.sub("", text).replace("\r", "\n")
