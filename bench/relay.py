"""The blind pipe's relay: POST a message on one worker → the recipient's socket on the
other (half the users hold their socket on each worker, and each message is posted to the
worker that does not hold it, so both workers take POSTs), with 2 uvicorn workers,
PostgreSQL and Redis (deploy/local.py), compared with a trivial DRF endpoint (/api/ping)
served by the same deployment in the same run.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/relay.py
Prints each round's requests/s of the baseline and relayed messages/s, their medians and
ratio, and POST→socket latency percentiles at a steady 100 messages/s. On 2 shared cores
the client-bound baseline swings from round to round (the client's core placement), hence
the warm-up, the alternation and the medians. Traffic goes to 127.0.0.1 only, bounded in
count and time.

The throughput ratio is that of this client: one Python process, which takes about a
core by itself (httpx), so neither phase saturates the server. It also prints the
server's CPU time per request and per relayed message (the uvicorn workers, PostgreSQL
and Redis, from /proc): their ratio is what the throughput ratio would be with a client
that cost nothing, the server's own capacity for each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from _stats import load, p95  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

RELATIONS = 10
WARM_UP_SECONDS = 3.0
STEADY_SECONDS = 10.0


def setup_world() -> dict[str, Any]:
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

    stamp = f"{int(time.time())}-{os.getpid()}"
    owner = User.objects.create(username=f"relay-owner-{stamp}")
    agent = agent_services.agent_create(owner=owner, name=f"relay {stamp}", capability_manifest=DEMO_MANIFEST)[0]
    users = []
    for i in range(RELATIONS):
        user = User.objects.create(username=f"relay-user-{i}-{stamp}")
        relation = relation_services.relation_create(user=user, agent_id=agent.pk, granted_scopes=[])
        users.append({"relation_id": str(relation.pk), "key": api_key_create(user=user)[1]})
    return {"agent_key": api_key_create(user=owner, agent=agent)[1], "users": users}


class ServerCpu:
    """CPU seconds used so far by the deployment's workers, PostgreSQL and Redis (Linux)."""

    def __init__(self, worker_pids: list[int]) -> None:
        import redis
        from django.db import connection

        self.worker_pids = worker_pids
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        self.postmaster = _stat(backend)[1]
        self.redis_pid = int(redis.Redis.from_url(os.environ["REDIS_URL"]).info("server")["process_id"])

    def sample(self) -> dict[str, float]:
        postgres = [self.postmaster, *(pid for pid, parent in _processes() if parent == self.postmaster)]
        return {"workers": sum(_stat(pid)[0] for pid in self.worker_pids),
                "postgres": sum(_stat(pid)[0] for pid in postgres), "redis": _stat(self.redis_pid)[0]}

    @staticmethod
    def per_op(before: dict[str, float], after: dict[str, float], ops: int) -> dict[str, float]:
        """Milliseconds of CPU per operation, by part and in all."""
        parts = {part: 1000 * (after[part] - before[part]) / ops for part in before}
        return {**parts, "total": sum(parts.values())}


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[float, int]:
    """(user + system CPU seconds of all its threads, parent pid); (0, 0) once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[1])


def _processes() -> list[tuple[int, int]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found.append((int(entry.name), _stat(int(entry.name))[1]))
    return found


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def closed_loop(send: Any, seconds: float, concurrency: int) -> int:
    deadline = time.perf_counter() + seconds
    done = 0

    async def lane() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await send()
            done += 1

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return done


class Receivers:
    """User i's socket is on worker i % 2; its messages are posted to the other worker."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.sockets: list[Any] = []

    async def open(self, world: dict[str, Any], ws_urls: list[str]) -> None:
        for i, user in enumerate(world["users"]):
            socket = await connect(f"{ws_urls[i % 2]}/ws/events?token={user['key']}", open_timeout=10,
                                   ping_interval=None, max_queue=None)
            self.sockets.append(socket)
            self.tasks.append(asyncio.create_task(self._read(socket)))
        await asyncio.sleep(0.5)

    async def _read(self, socket: Any) -> None:
        import json

        async for text in socket:
            frame = json.loads(text)
            if frame["type"] == "message.new":
                self.arrivals[frame["data"]["message"]["payload"]["n"]] = time.perf_counter()

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        for socket in self.sockets:
            await socket.close()


async def run(world: dict[str, Any], urls: list[str], ws_urls: list[str], seconds: float, concurrency: int,
              rounds: int, cpu: ServerCpu) -> dict[str, Any]:
    """Both endpoints are warmed up first (a cold client or worker is slower at whichever
    phase comes first), then measured in alternating rounds, so a slow moment of the
    machine falls on both; the figures are the medians of the rounds."""
    receivers = Receivers()
    await receivers.open(world, ws_urls)
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2)
    headers = {"Authorization": f"Bearer {world['agent_key']}"}
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        turn = [0]

        async def ping() -> None:
            turn[0] += 1
            response = await client.get(f"{urls[turn[0] % 2]}/api/ping")
            assert response.status_code == 200

        async def relay_phase(phase_seconds: float) -> tuple[float, int]:
            """Messages/s from the first POST to the last arrival, and how many were sent."""
            sent: dict[str, float] = {}

            async def relay() -> None:
                turn[0] += 1
                n = f"t{turn[0]}"
                i = turn[0] % RELATIONS
                user = world["users"][i]
                sent[n] = time.perf_counter()
                response = await client.post(f"{urls[1 - i % 2]}/h2a/relations/{user['relation_id']}/messages",
                                             headers=headers,
                                             json={"msg_subtype": "text", "content_type": "text", "payload": {"n": n}})
                assert response.status_code == 201, response.text

            started = time.perf_counter()
            await closed_loop(relay, phase_seconds, concurrency)
            await wait_for_all(receivers, sent, timeout=30)
            return len(sent) / (max(receivers.arrivals[n] for n in sent) - started), len(sent)

        await closed_loop(ping, WARM_UP_SECONDS, concurrency)
        await relay_phase(WARM_UP_SECONDS)
        baselines, relayed, ping_cpu, relay_cpu = [], [], [], []
        for _ in range(rounds):
            before = cpu.sample()
            pings = await closed_loop(ping, seconds, concurrency)
            ping_cpu.append(cpu.per_op(before, cpu.sample(), pings))
            baselines.append(pings / seconds)
            before = cpu.sample()
            rate, messages = await relay_phase(seconds)
            relay_cpu.append(cpu.per_op(before, cpu.sample(), messages))
            relayed.append(rate)
        latencies = await steady(client, world, urls, receivers, rate=100, seconds=STEADY_SECONDS, headers=headers)
    await receivers.close()
    return {"baselines": baselines, "relayed": relayed, "baseline": statistics.median(baselines),
            "relay": statistics.median(relayed), "p50": statistics.median(latencies), "p95": p95(latencies),
            "p99": percentile(latencies, 0.99), "count": len(latencies),
            "ping_cpu": {part: statistics.median(c[part] for c in ping_cpu) for part in ping_cpu[0]},
            "relay_cpu": {part: statistics.median(c[part] for c in relay_cpu) for part in relay_cpu[0]}}


async def wait_for_all(receivers: Receivers, sent: dict[str, float], timeout: float) -> None:
    deadline = time.perf_counter() + timeout
    while any(n not in receivers.arrivals for n in sent):
        if time.perf_counter() > deadline:
            missing = sum(n not in receivers.arrivals for n in sent)
            raise RuntimeError(f"{missing} of {len(sent)} messages never reached their socket")
        await asyncio.sleep(0.05)


async def steady(client: httpx.AsyncClient, world: dict[str, Any], urls: list[str], receivers: Receivers, *,
                 rate: int, seconds: float, headers: dict[str, str]) -> list[float]:
    sent: dict[str, float] = {}
    pending = []
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        n = f"s{i}"
        user = world["users"][i % RELATIONS]
        sent[n] = time.perf_counter()
        pending.append(asyncio.create_task(client.post(
            f"{urls[1 - (i % RELATIONS) % 2]}/h2a/relations/{user['relation_id']}/messages", headers=headers,
            json={"msg_subtype": "text", "content_type": "text", "payload": {"n": n}})))
    await asyncio.gather(*pending)
    await wait_for_all(receivers, sent, timeout=30)
    return [(receivers.arrivals[n] - sent[n]) * 1000 for n in sent]


def cpu_line(label: str, cpu: dict[str, float]) -> str:
    return (f"{label:<44} {cpu['total']:9.3f} ms  (workers {cpu['workers']:.3f}, PostgreSQL {cpu['postgres']:.3f}, "
            f"Redis {cpu['redis']:.3f}; median of the rounds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each measured phase")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of both phases")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get("REDIS_URL"):
        sys.exit("bench/relay.py needs DATABASE_URL=postgres://… and REDIS_URL=redis://…")
    world = setup_world()
    from deploy.local import Deployment

    with Deployment(workers=2, uvicorn_args=["--timeout-keep-alive", "30"]) as deployment:
        cpu = ServerCpu([worker.process.pid for worker in deployment.workers])
        figures = asyncio.run(run(world, deployment.urls, deployment.ws_urls, args.seconds, args.concurrency,
                                  args.rounds, cpu))
    pairs = list(zip(figures["baselines"], figures["relayed"], strict=True))
    rounds = "  ".join(f"{b:.0f}/{r:.0f}" for b, r in pairs)
    round_ratio = statistics.median(r / b for b, r in pairs)
    lines = [
        f"relay benchmark: 2 uvicorn workers, PostgreSQL, Redis; {os.cpu_count()} cores; "
        f"{args.concurrency} concurrent clients; {WARM_UP_SECONDS:.0f} s warm-up of each, then {args.rounds} "
        f"alternating rounds of {args.seconds:.0f} s per phase (medians)",
        f"{'rounds (requests/s / messages/s)':<44} {rounds}",
        f"{'trivial DRF endpoint (/api/ping)':<44} {figures['baseline']:9.1f} requests/s",
        f"{'relay POST → socket on the other worker':<44} {figures['relay']:9.1f} messages/s",
        f"{'ratio relay / trivial endpoint':<44} {figures['relay'] / figures['baseline']:9.2f}x  (target ≥ 0.5; "
        f"median of the rounds' own ratios {round_ratio:.2f}x)",
        f"{'latency at 100 msg/s (POST → socket)':<44} p50 {figures['p50']:.1f} ms  p95 {figures['p95']:.1f} ms"
        f"  p99 {figures['p99']:.1f} ms  n={figures['count']:.0f}  (target p99 < 50 ms)",
        cpu_line("server CPU per trivial request", figures["ping_cpu"]),
        cpu_line("server CPU per relayed message", figures["relay_cpu"]),
        f"{'capacity ratio (CPU per request / message)':<44} "
        f"{figures['ping_cpu']['total'] / figures['relay_cpu']['total']:9.2f}x  (the throughput ratio with a client "
        f"that cost nothing)",
        f"measured at {load()}",
    ]
    print("\n".join(lines))
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "relay.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
