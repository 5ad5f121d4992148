"""A PostgreSQL cluster or a Redis of one test's own, on free 127.0.0.1 ports, that the
test may stop and start again without disturbing the servers other tests share."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from deploy.local import free_ports

PG_BIN = Path(os.environ.get("HASHEE_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _as_postgres(command: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


class PrivatePostgres:
    def __init__(self) -> None:
        # Its own directory under /tmp: pytest's tmp_path is private to root, and the
        # cluster runs as postgres when we are root.
        self.home = Path(tempfile.mkdtemp(prefix="hashee-pg-"))
        self.data = self.home / "pg"
        self.port = free_ports(1)[0]
        if os.geteuid() == 0:
            shutil.chown(self.home, "postgres")
        subprocess.run(_as_postgres([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "hashee", "--auth=trust",
                                     "-E", "UTF8", "--locale=C.UTF-8"]),
                       check=True, capture_output=True, timeout=120)

    @property
    def url(self) -> str:
        return f"postgres://hashee@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} -c fsync=off"
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.data / "log"),
                                     "-w", "-t", "60", "-o", options, "start"]),
                       check=True, capture_output=True, timeout=90)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]),
                           check=False, capture_output=True, timeout=90)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)


class PrivateRedis:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_ports(1)[0]
        self.process: subprocess.Popen[bytes] | None = None
        home.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--dir", str(self.home)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done = subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True, timeout=5,
                                  check=False)
            if done.stdout.strip() == b"PONG":
                return
            time.sleep(0.1)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None
