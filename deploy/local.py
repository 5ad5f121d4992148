"""Run N uvicorn workers on 127.0.0.1 against one PostgreSQL and one Redis.

Each worker is a separate process (``uvicorn hashee.asgi:application``) on its own free
port, so an event caused by a request on one worker must reach, through the shared
database and channel layer, the sockets held by another. Used by the end-to-end tests
and the benchmarks, and by hand:

    DATABASE_URL=postgres://… REDIS_URL=redis://… python deploy/local.py --workers 2

prints the workers' URLs and the log directory, and runs until Ctrl-C or SIGTERM.

As a library::

    with Deployment(workers=2) as d:
        d.urls      # ["http://127.0.0.1:P1", "http://127.0.0.1:P2"]
        d.ws_urls   # ["ws://127.0.0.1:P1", "ws://127.0.0.1:P2"]

The environment passes through (``env=`` overrides or adds variables), plus
``DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost`` and ``HASHEE_WEBHOOK_ALLOW_PRIVATE=1``, and
a random ``DJANGO_SECRET_KEY`` shared by the workers unless one is set, and
``PROMETHEUS_MULTIPROC_DIR`` (a fresh ``metrics-…`` directory under ``log_dir`` unless one
is set, which must start empty), where every worker writes the values ``GET /metrics`` adds up.
``DATABASE_URL`` and ``REDIS_URL`` are required: several workers need a shared database
and a shared channel layer. ``manage.py migrate --noinput`` runs first. Workers' output
goes to ``worker-<i>.log`` under ``log_dir`` (a fresh temporary directory by default).
Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
REQUIRED = ("DATABASE_URL", "REDIS_URL")
# Event frames are small JSON or ciphertext: compressing each one costs both ends CPU for
# next to nothing (measured: relay p99 at 100 msg/s ~60 ms with it, ~25-55 ms without).
UVICORN_ARGS = ("--no-access-log", "--ws-per-message-deflate", "false")
FIXED_ENV = {"DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "HASHEE_WEBHOOK_ALLOW_PRIVATE": "1"}
START_ATTEMPTS = 3  # a free port can be taken between choosing it and uvicorn binding it


class DeploymentError(RuntimeError):
    pass


def _bin(name: str) -> list[str]:
    """The venv's console script (beside this interpreter, else ROOT/.venv), else ``-m``."""
    for directory in (Path(sys.executable).parent, ROOT / ".venv" / "bin"):
        candidate = directory / name
        if candidate.exists():
            return [str(candidate)]
    return [sys.executable, "-m", name]


def _python() -> str:
    venv_python = ROOT / ".venv" / "bin" / "python"
    if Path(sys.prefix) != Path(sys.base_prefix) or not venv_python.exists():
        return sys.executable  # already inside a virtualenv (the project's, or CI's)
    return str(venv_python)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free a moment ago (held together while chosen)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _child_setup(die_with_parent: bool) -> None:
    """In each worker before exec: a generous file limit (one descriptor per socket) and,
    on Linux, SIGTERM when the launching thread dies, so workers never outlive a crashed
    test (only when launched from the main thread, which lives as long as the process)."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if die_with_parent and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Worker:
    def __init__(self, index: int, port: int, process: subprocess.Popen[bytes], log_path: Path,
                 log_file: IO[bytes]) -> None:
        self.index = index
        self.port = port
        self.process = process
        self.log_path = log_path
        self._log_file = log_file

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def terminate(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float, *, signalled: bool = False) -> None:
        """SIGTERM (unless already sent: a second one makes uvicorn skip its graceful
        shutdown), wait up to ``timeout``, then SIGKILL."""
        if self.alive():
            if not signalled:
                self.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                self.process.wait(timeout=5)
        self._log_file.close()


class Deployment:
    """N uvicorn workers on free 127.0.0.1 ports; a context manager (stops them on exit)."""

    def __init__(self, workers: int = 2, *, env: Mapping[str, str] | None = None, migrate: bool = True,
                 log_dir: str | Path | None = None, startup_timeout: float = 60.0, stop_timeout: float = 10.0,
                 uvicorn_args: Sequence[str] = ()) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers_wanted = workers
        self.env = {**os.environ, **(env or {}), **FIXED_ENV, "PYTHONUNBUFFERED": "1"}
        # Workers refuse the public development key with DEBUG off; they need one key together.
        self.env.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
        missing = [name for name in REQUIRED if not self.env.get(name)]
        if missing:
            raise DeploymentError(
                f"{' and '.join(missing)} must be set: several workers need a shared database (PostgreSQL) "
                "and a shared channel layer (Redis). See deploy/README.md.")
        self.migrate = migrate
        self.log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="hashee-deploy-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # The workers report their metrics together through files here (prometheus-client's
        # multiprocess mode); files left by an earlier run would be counted too.
        if not self.env.get("PROMETHEUS_MULTIPROC_DIR"):
            self.env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="metrics-", dir=self.log_dir)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.uvicorn_args = list(uvicorn_args)
        self.workers: list[Worker] = []
        self._lock = threading.Lock()

    @property
    def urls(self) -> list[str]:
        return [w.url for w in self.workers]

    @property
    def ws_urls(self) -> list[str]:
        return [w.url.replace("http://", "ws://", 1) for w in self.workers]

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> Deployment:
        try:
            if self.migrate:
                self._migrate()
            pending = list(range(self.workers_wanted))
            for _attempt in range(START_ATTEMPTS):
                ports = free_ports(len(pending))
                started = [self._spawn(i, port) for i, port in zip(pending, ports, strict=True)]
                failed = self._await_ready(started)
                pending = [w.index for w in failed]
                for worker in failed:
                    worker.stop(self.stop_timeout)
                    self.workers.remove(worker)
                if not pending:
                    self.workers.sort(key=lambda w: w.index)
                    return self
            raise DeploymentError(f"workers {pending} did not start; see the logs in {self.log_dir}")
        except BaseException:
            self.stop()
            raise

    def _migrate(self) -> None:
        log_path = self.log_dir / "migrate.log"
        with log_path.open("wb") as log:
            result = subprocess.run([_python(), str(ROOT / "manage.py"), "migrate", "--noinput"],  # noqa: S603
                                    cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=max(self.startup_timeout, 120), check=False)
        if result.returncode != 0:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
            raise DeploymentError(f"manage.py migrate failed ({result.returncode}):\n{tail}")

    def _spawn(self, index: int, port: int) -> Worker:
        log_path = self.log_dir / f"worker-{index}.log"
        log_file = log_path.open("ab")
        command = [*_bin("uvicorn"), "hashee.asgi:application", "--host", HOST, "--port", str(port),
                   *UVICORN_ARGS, *self.uvicorn_args]
        setup = functools.partial(_child_setup, threading.current_thread() is threading.main_thread())
        process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log_file,  # noqa: S603
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=setup)
        worker = Worker(index, port, process, log_path, log_file)
        with self._lock:
            self.workers.append(worker)
        return worker

    def _await_ready(self, workers: list[Worker]) -> list[Worker]:
        """Wait until each answers GET /healthz with 200; returns those that died."""
        deadline = time.monotonic() + self.startup_timeout
        waiting = list(workers)
        failed: list[Worker] = []
        while waiting:
            for worker in list(waiting):
                if not worker.alive():
                    waiting.remove(worker)
                    failed.append(worker)
                elif _healthy(worker.url):
                    waiting.remove(worker)
            if waiting and time.monotonic() > deadline:
                details = "\n".join(f"-- worker {w.index} ({w.url}), {w.log_path}:\n{w.log_tail()}" for w in waiting)
                raise DeploymentError(f"workers not healthy after {self.startup_timeout:.0f} s:\n{details}")
            if waiting:
                time.sleep(0.1)
        return failed

    def stop(self) -> None:
        with self._lock:
            workers, self.workers = self.workers, []
        for worker in workers:  # signal them all first, then wait: they stop in parallel
            worker.terminate()
        for worker in workers:
            worker.stop(self.stop_timeout, signalled=True)

    def dead_workers(self) -> list[Worker]:
        return [w for w in self.workers if not w.alive()]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:  # noqa: S310 (http://127.0.0.1 only)
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=2, help="how many uvicorn processes (default 2)")
    parser.add_argument("--no-migrate", action="store_true", help="skip manage.py migrate")
    parser.add_argument("--log-dir", help="where the workers' logs go (default: a new temporary directory)")
    args = parser.parse_args(argv)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    try:
        deployment = Deployment(workers=args.workers, migrate=not args.no_migrate, log_dir=args.log_dir)
    except DeploymentError as exc:
        print(f"deploy/local.py: {exc}", file=sys.stderr)
        return 2
    print(f"logs: {deployment.log_dir}", flush=True)
    try:
        with deployment:
            for url in deployment.urls:
                print(url, flush=True)
            print("running; Ctrl-C or SIGTERM stops the workers", flush=True)
            while not stop.wait(1.0):
                dead = deployment.dead_workers()
                if dead:
                    for worker in dead:
                        print(f"worker {worker.index} ({worker.url}) exited with {worker.process.returncode}; "
                              f"log {worker.log_path}:\n{worker.log_tail()}", file=sys.stderr)
                    return 1
    except DeploymentError as exc:
        print(f"deploy/local.py: {exc}", file=sys.stderr)
        return 1
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
