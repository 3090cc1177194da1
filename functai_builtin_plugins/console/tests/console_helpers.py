"""What the console's tests share: the access token they use, a child process's environment, and
``functai console`` run as a real process."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent

TOKEN = "console-test-token-0123456789"


def environment(**more: str) -> dict[str, str]:
    """What a child process needs: the example modules importable, no FUNCTAI_* settings of the developer's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(more)
    return env


class Server:
    """``functai console`` in its own process; ``url`` is the address it printed (with the token)."""

    def __init__(self, *args: str, cwd: pathlib.Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "functai", "console", *args], cwd=cwd,
                                        env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError("the console exited: " + "".join(lines) + self.process.stderr.read())
            lines.append(line)
            found = re.search(r"open: (http://\S+)", line)
            if found:
                self.url = found.group(1)
                self.base = self.url.split("/?")[0]
                return
        raise AssertionError("the console printed no address: " + "".join(lines))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


