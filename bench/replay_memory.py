"""What clients that never read cost a worker: 40 sockets replaying ``?since=0`` over 100
messages of ~250 KB each, on one uvicorn worker with PostgreSQL and Redis
(deploy/local.py).

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/replay_memory.py

The clients are raw TCP sockets with a 4 KiB receive buffer that complete the WebSocket
handshake and then never read, so the worker's sends block as a real stalled client's
would. Prints the worker's resident memory (VmRSS) before, while the sockets are held
(its peak and where it settles) and after they are closed, and checks that one socket
more than HASHEE_MAX_SOCKETS_PER_PRINCIPAL is refused with 4429 (the run raises the cap to
the 40 sockets it opens). Targets: under 50 MB of growth, back down after the close.
Traffic goes to 127.0.0.1 only, bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import secrets
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

PAYLOAD_CHARS = 250_000
SETTLE_SECONDS = 3.0  # RSS unchanged (within 1 MB) this long counts as settled
MAX_WAIT_SECONDS = 60.0


def setup_world(messages: int) -> dict[str, Any]:
    """A user with a relation whose agent has sent ``messages`` incompressible payloads."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agents import services as agent_services
    from agents.apikey_services import api_key_create
    from agents.management.commands.seed_demo import DEMO_MANIFEST
    from relations import services as relation_services
    from relations.models import Relation
    from toolcalls.services import Sender, _message_store

    stamp = f"{int(time.time())}-{os.getpid()}"
    owner = User.objects.create(username=f"replay-owner-{stamp}")
    user = User.objects.create(username=f"replay-user-{stamp}")
    agent = agent_services.agent_create(owner=owner, name=f"replay {stamp}", capability_manifest=DEMO_MANIFEST)[0]
    relation = relation_services.relation_create(user=user, agent_id=agent.pk, granted_scopes=[])
    relation = Relation.objects.select_related("agent").get(pk=relation.pk)
    for _ in range(messages):
        payload = base64.b64encode(secrets.token_bytes(PAYLOAD_CHARS * 3 // 4)).decode()  # like E2EE ciphertext
        _message_store(sender=Sender(kind="agent", relation=relation), msg_subtype="text",
                       content_type="application/octet-stream", payload=payload, size=len(payload) + 2)
    return {"user_key": api_key_create(user=user)[1]}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def stalled_socket(port: int, path: str) -> socket.socket:
    """A WebSocket client that completes the handshake, then never reads."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(secrets.token_bytes(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:  # byte by byte: nothing of the frames after it is read
        chunk = sock.recv(1)
        if not chunk:
            raise RuntimeError("connection closed during the handshake")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"handshake refused: {head.splitlines()[0]!r}")
    return sock


def settle(pid: int) -> tuple[float, float]:
    """Sample RSS until it stays within 1 MB for SETTLE_SECONDS; returns (peak, settled)."""
    peak = last = rss_mb(pid)
    steady_since = time.monotonic()
    deadline = time.monotonic() + MAX_WAIT_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = rss_mb(pid)
        peak = max(peak, now)
        if abs(now - last) > 1:
            last, steady_since = now, time.monotonic()
        elif time.monotonic() - steady_since >= SETTLE_SECONDS:
            break
    return peak, rss_mb(pid)


async def one_more_is_refused(ws_url: str, path: str) -> str:
    async with connect(f"{ws_url}{path}", open_timeout=10, ping_interval=None) as extra:
        try:
            await asyncio.wait_for(extra.recv(), timeout=10)
        except ConnectionClosed as closed:
            return f"{closed.rcvd.code if closed.rcvd else None} {closed.rcvd.reason if closed.rcvd else ''}"
    return "not refused"


async def warm_up(ws_url: str, path: str) -> None:
    """One reading replay first, so the code and connections it loads count in the baseline."""
    async with connect(f"{ws_url}{path}", open_timeout=10, ping_interval=None, max_size=None) as client:
        await client.send('{"type":"ping"}')
        while '"pong"' not in str(await asyncio.wait_for(client.recv(), timeout=30)):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sockets", type=int, default=40)
    parser.add_argument("--messages", type=int, default=100)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get("REDIS_URL"):
        sys.exit("bench/replay_memory.py needs DATABASE_URL=postgres://… and REDIS_URL=redis://…")
    world = setup_world(args.messages)
    from deploy.local import Deployment

    path = f"/ws/events?token={world['user_key']}&since=0"
    env = {"HASHEE_MAX_SOCKETS_PER_PRINCIPAL": str(args.sockets)}
    # uvicorn drops a client that answers no ping after ~40 s: the sockets are measured held.
    with Deployment(workers=1, env=env, uvicorn_args=["--ws-ping-interval", "600"]) as deployment:
        worker = deployment.workers[0]
        pid, port = worker.process.pid, worker.port
        asyncio.run(warm_up(deployment.ws_urls[0], path))
        _, before = settle(pid)
        held = [stalled_socket(port, path) for _ in range(args.sockets)]
        peak, holding = settle(pid)
        refusal = asyncio.run(one_more_is_refused(deployment.ws_urls[0], path))
        for sock in held:
            sock.close()
        _, after = settle(pid)
    lines = [
        f"replay memory: 1 uvicorn worker, PostgreSQL, Redis; {args.sockets} sockets replaying ?since=0 over "
        f"{args.messages} messages of ~{PAYLOAD_CHARS // 1000} KB, never reading (4 KiB receive buffers)",
        f"{'worker RSS before':<44} {before:9.1f} MB",
        f"{'worker RSS while held (peak / settled)':<44} {peak:9.1f} MB / {holding:.1f} MB",
        f"{'growth while held (peak / settled)':<44} {peak - before:9.1f} MB / {holding - before:.1f} MB"
        f"  (target < 50 MB)",
        f"{'worker RSS after closing them':<44} {after:9.1f} MB  ({after - before:+.1f} MB from before)",
        f"{f'socket {args.sockets + 1} of the same user':<44} closed: {refusal}",
        f"measured at load {os.getloadavg()[0]:.2f}",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
