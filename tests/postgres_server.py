"""A real PostgreSQL server for the tests: started once per session on 127.0.0.1, stopped after.

It runs from the machine's PostgreSQL binaries (the ``postgresql`` Debian
package that ``.ci/run`` installs, or any ``initdb`` on PATH) with a
throw-away data folder. PostgreSQL refuses to run as root, so as root the
server runs as the ``postgres`` user (``runuser``). Set
``FUNCTAI_TEST_POSTGRES_URL`` (a ``postgresql://`` URL) to use a server of
your own instead; its user must be allowed to create schemas.

Each test gets a fresh schema (``search_path`` in the URL's options). With ``FUNCTAI_REQUIRE_POSTGRES=1`` (CI)
a server that cannot start fails the tests instead of skipping them.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from typing import Iterator

USER = "functai"


class Unavailable(Exception):
    """No PostgreSQL server can be had here; the message says why."""


def _binaries() -> str:
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]))
    if versions:
        return os.path.dirname(versions[-1])
    raise Unavailable("no PostgreSQL binaries (initdb) on PATH or in /usr/lib/postgresql/*/bin; "
                      "install them: apt-get install postgresql")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """One throw-away cluster; ``url(database)`` connects to it."""

    def __init__(self) -> None:
        self.external = os.environ.get("FUNCTAI_TEST_POSTGRES_URL")
        self.base: str | None = None
        self.prefix: list[str] = []
        if self.external:
            self.admin = self.external
            return
        try:
            import psycopg  # noqa: F401
        except ImportError as error:
            raise Unavailable(f'psycopg is not installed (pip install --group dev): {error}') from error
        bin_dir = _binaries()
        self.base = tempfile.mkdtemp(prefix="functai-pg-")
        if os.geteuid() == 0:  # PostgreSQL will not run as root
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError as error:
                raise Unavailable("running as root and there is no 'postgres' user to run the server as") from error
            os.chown(self.base, owner.pw_uid, owner.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.base, "data")
        self.port = _free_port()
        self.pg_ctl = os.path.join(bin_dir, "pg_ctl")
        self._run(os.path.join(bin_dir, "initdb"), "-D", self.data, "-A", "trust", "-U", USER, "-E", "UTF8",
                  "--no-sync", "--no-locale")
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.base} -c max_connections=200"
        self._run(self.pg_ctl, "-D", self.data, "-l", os.path.join(self.base, "server.log"), "-w", "-t", "60",
                  "-o", options, "start")
        self.admin = self.url("postgres")

    def _run(self, *command: str) -> None:
        done = subprocess.run([*self.prefix, *command], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = ""
            if self.base and os.path.exists(os.path.join(self.base, "server.log")):
                with open(os.path.join(self.base, "server.log")) as handle:
                    log = handle.read()[-2000:]
            raise Unavailable(f"{os.path.basename(command[0])} failed: {done.stderr.strip() or done.stdout.strip()} "
                              f"{log}")

    def url(self, database: str) -> str:
        if self.external:
            return self.external
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_url(self) -> str:
        """The URL of a fresh, empty schema (a CREATE DATABASE per test would cost 0.2 s)."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        separator = "&" if "?" in self.admin else "?"
        return f"{self.admin}{separator}options=-csearch_path%3D{name}"

    def stop(self) -> None:
        if self.base is None:
            return
        try:
            self._run(self.pg_ctl, "-D", self.data, "-m", "immediate", "-w", "stop")  # its data is thrown away
        except Unavailable:
            pass
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None


def session_server() -> Iterator[Server | str]:
    """The session's server, or the reason none can be had."""
    try:
        server = Server()
    except Unavailable as why:
        yield str(why)
        return
    try:
        yield server
    finally:
        server.stop()
