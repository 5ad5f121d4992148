"""A breaking manifest change at scale (SPEC §4 "Effects on relations", §5.4), on
PostgreSQL + Redis only.

(i)  A breaking PATCH through the API (validate, diff, store, the one audience event,
     commit) on an agent with 100,000 live relations against the same on an agent with
     10: medians, p95 and their ratio, the SQL statements and doorbells per PATCH, and a
     check that no relation row was written. Targets: < 250 ms, ratio ≤ 1.5.
(ii) 10,000 sockets (one user each, all with a live relation to that agent), split
     evenly across 2 uvicorn workers (deploy/local.py) sharing the database and Redis;
     a breaking PATCH through worker A; for every socket, the time from the PATCH
     response (the commit precedes it) to its h2a.reauth_required frame: p50/p95/max and
     how many arrived (target: all, p95 < 1 s), then each exactly once; then 100 sockets
     reconnect with ``?since=<their last id before the change>`` and must receive the
     frame exactly once.

Run: DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/reauth_scale.py
     [--relations 100000] [--sockets 10000] [--skip-sockets] [--keep-db]
It works in a database of its own (``<name>_reauth_bench``, dropped afterwards), sends
traffic to 127.0.0.1 only, and bounds every phase with a timeout. The figures are
printed and written to bench/results/reauth_scale.txt. Note the client's timestamps are
taken by one Python process that holds all the sockets on the same 2 cores as the
servers: they include the client's own queueing (an upper bound on delivery time).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import json
import os
import platform
import resource
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from _stats import p95, row  # noqa: E402
from websockets.asyncio.client import ClientConnection, connect  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "reauth_scale.txt"
PONG = json.dumps({"type": "pong"})
BATCH = 5000
FD_MARGIN = 512
GRANTED = ["filesystem:read", "notification:send"]
LINES: list[str] = []


def say(line: str = "") -> None:
    LINES.append(line)
    print(line, flush=True)


# -- the database ------------------------------------------------------------------------


def postgres_url_or_exit() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if urlsplit(url).scheme not in ("postgres", "postgresql", "pgsql"):
        sys.exit("bench/reauth_scale.py measures PostgreSQL only: set DATABASE_URL=postgres://… "
                 "(scripts/lib.sh start_postgres, or the dev server: postgres://hashee@127.0.0.1:55432/hashee).")
    return url


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + quote(name)))


def recreate_database(url: str, name: str, *, drop_only: bool = False) -> None:
    """(Re)create the bench's own database through the server's maintenance connection."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if not drop_only:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def manifest_at(step: int) -> dict[str, Any]:
    """Step ``step`` of a chain in which every manifest is breaking against the previous:
    odd steps raise filesystem:read (medium → high), even steps lower it back (silent) and
    add a new scope (``bench:s<step>``, SCOPE_ADDED, breaking); the previous step's extra
    scope is dropped (silent)."""
    from agents.management.commands.seed_demo import DEMO_MANIFEST

    manifest = copy.deepcopy(DEMO_MANIFEST)
    manifest["agent_version"] = f"1.0.{step}"
    if step % 2:
        manifest["permission_scopes"][0]["sensitivity"] = "high"
    extra = step - step % 2  # the scope added at the last even step
    if extra:
        manifest["permission_scopes"].append({"id": f"bench:s{extra}", "label_i18n_key": f"bench.s{extra}.label",
                                              "sensitivity": "low"})
    return manifest


@dataclass
class World:
    owner_key: str
    small_agent: str
    big_agent: str
    user_ids: list[int]
    next_step: dict[str, int] = field(default_factory=dict)


def build_world(relations: int, small: int) -> World:
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User
    from django.db import connection

    from agents import services
    from agents.apikey_services import api_key_create
    from relations.models import Relation

    start = time.perf_counter()
    unusable = make_password(None)
    owner = User.objects.create(username="bench-owner")
    _, owner_key = api_key_create(user=owner)
    agents = {}
    for name in ("small", "big"):
        agent, _, _ = services.agent_create(owner=owner, name=f"bench {name}", capability_manifest=manifest_at(0))
        agents[name] = agent
    user_ids: list[int] = []
    for offset in range(0, relations, BATCH):
        batch = [User(username=f"bench-u{i}", password=unusable) for i in range(offset, min(relations, offset + BATCH))]
        user_ids.extend(u.pk for u in User.objects.bulk_create(batch))
    for agent, ids in ((agents["big"], user_ids), (agents["small"], user_ids[:small])):
        for offset in range(0, len(ids), BATCH):
            Relation.objects.bulk_create([
                Relation(user_id=uid, agent=agent, granted_scopes=GRANTED, acknowledged_manifest_version=1,
                         events_from_id=0) for uid in ids[offset:offset + BATCH]])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    say(f"setup: {relations:,} users, {relations + small:,} relations in {time.perf_counter() - start:.1f} s")
    return World(owner_key=owner_key, small_agent=str(agents["small"].pk), big_agent=str(agents["big"].pk),
                 user_ids=user_ids, next_step={str(agents["small"].pk): 1, str(agents["big"].pk): 1})


def next_manifest(world: World, agent_id: str) -> dict[str, Any]:
    step = world.next_step[agent_id]
    world.next_step[agent_id] = step + 1
    return manifest_at(step)


# -- (i) the PATCH -----------------------------------------------------------------------


@contextlib.contextmanager
def counting_doorbells() -> Iterator[list[int]]:
    from eventlog import services as events

    rung: list[int] = []
    original = events.ring_doorbell

    def counted(event: Any) -> None:
        rung.append(event.id)
        original(event)

    events.ring_doorbell = counted
    try:
        yield rung
    finally:
        events.ring_doorbell = original


def patch_phase(world: World, *, repeat: int, warmup: int, relations: int, small: int) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from rest_framework.test import APIClient

    from relations.models import Relation
    from relations.selectors import relation_states

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {world.owner_key}")

    def patch(agent_id: str) -> dict[str, Any]:
        response = api.patch(f"/agents/{agent_id}", {"capability_manifest": next_manifest(world, agent_id)},
                             format="json")
        assert response.status_code == 200, response.content[:500]
        body: dict[str, Any] = response.json()
        assert body["breaking_changes"], f"PATCH was not breaking: {body['changes']}"
        return body

    samples: dict[str, list[float]] = {world.small_agent: [], world.big_agent: []}
    mark = timezone.now()
    for i in range(warmup + repeat):  # interleaved, so drift hits both alike
        for agent_id in samples:
            start = time.perf_counter()
            patch(agent_id)
            if i >= warmup:
                samples[agent_id].append(time.perf_counter() - start)

    shapes = {}
    for agent_id in samples:
        with CaptureQueriesContext(connection) as queries, counting_doorbells() as rung:
            patch(agent_id)
        relation_writes = [q["sql"] for q in queries.captured_queries
                           if "relations_relation" in q["sql"] and not q["sql"].lstrip().upper().startswith("SELECT")]
        shapes[agent_id] = (len(queries.captured_queries), len(rung), len(relation_writes))
    touched = Relation.objects.filter(updated_at__gt=mark).count()
    relation = Relation.objects.filter(agent_id=world.big_agent).select_related("agent").first()
    assert relation is not None
    state = relation_states([relation])[relation.pk]

    small_median = statistics.median(samples[world.small_agent])
    big_median = statistics.median(samples[world.big_agent])
    say()
    say(f"(i) breaking PATCH /agents/{{id}} through the API (APIClient, in process), {repeat} runs each, interleaved")
    say(row(f"agent with {small:,} live relations", samples[world.small_agent]))
    say(row(f"agent with {relations:,} live relations", samples[world.big_agent]))
    say(f"{f'ratio of medians ({relations:,} / {small:,})':<44} {big_median / small_median:9.2f}x"
        f"   (target ≤ 1.5x; {relations:,}-relation median target < 250 ms: "
        f"{'met' if big_median < 0.25 else 'MISSED'})")
    for label, agent_id in ((f"{small:,}", world.small_agent), (f"{relations:,}", world.big_agent)):
        statements, doorbells, writes = shapes[agent_id]
        say(f"  per PATCH on the {label}-relation agent: {statements} SQL statements, {doorbells} doorbell(s), "
            f"{writes} write(s) to relations_relation")
    say(f"  relation rows written by all {(warmup + repeat + 1) * 2} PATCHes: {touched}; "
        f"a relation of the big agent now reads status={state.status}, pending={state.pending_scopes}")


# -- (ii) the sockets --------------------------------------------------------------------


def raise_fd_limit(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        sys.exit(f"RLIMIT_NOFILE hard limit is {hard}; {needed} descriptors are needed for these sockets "
                 f"(raise it, e.g. `ulimit -Hn {needed}` as root, or pass a smaller --sockets)")
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def user_keys(user_ids: list[int]) -> list[str]:
    """One hsk_ key per user, in bulk (the same scheme as agents.apikey_services.api_key_create)."""
    from agents.auth import PREFIX_LENGTH, USER_KEY_MARKER, hash_secret
    from agents.models import ApiKey

    secrets_out: list[str] = []
    rows = []
    for uid in user_ids:
        token = secrets.token_urlsafe(32)
        secret = f"{USER_KEY_MARKER}{token}"
        secrets_out.append(secret)
        rows.append(ApiKey(kind=ApiKey.Kind.USER, user_id=uid, name="bench", prefix=token[:PREFIX_LENGTH],
                           key_hash=hash_secret(secret)))
    for offset in range(0, len(rows), BATCH):
        ApiKey.objects.bulk_create(rows[offset:offset + BATCH])
    return secrets_out


@dataclass
class Client:
    index: int
    worker: int
    key: str
    ws: ClientConnection | None = None
    raw: list[tuple[float, float, str]] = field(default_factory=list)  # (perf_counter, wall clock, text)
    pong: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None

    @property
    def frames(self) -> list[tuple[float, float, dict[str, Any]]]:
        """Parsed after the fact: the reading loop only timestamps and stores."""
        return [(t, wall, json.loads(text)) for t, wall, text in self.raw]

    def received(self, kind: str) -> list[tuple[float, float, dict[str, Any]]]:
        return [f for f in self.frames if f[2].get("type") == kind]


class Swarm:
    """Many sockets in this one process, each read by its own task."""

    def __init__(self, ws_urls: list[str], keys: list[str], concurrency: int) -> None:
        self.ws_urls = ws_urls
        self.clients = [Client(i, i % len(ws_urls), key) for i, key in enumerate(keys)]
        self.gate = asyncio.Semaphore(concurrency)
        self.counts: dict[str, int] = {}
        self.arrived: dict[str, asyncio.Event] = {}
        self.expected = 0

    def expect(self, kind: str, count: int) -> asyncio.Event:
        self.counts[kind] = 0
        self.expected = count
        self.arrived[kind] = asyncio.Event()
        return self.arrived[kind]

    async def _read(self, client: Client) -> None:
        assert client.ws is not None
        with contextlib.suppress(Exception):
            async for message in client.ws:
                now, wall = time.perf_counter(), time.time()
                text = message if isinstance(message, str) else message.decode()
                if text == PONG:
                    client.pong.set()
                    continue
                client.raw.append((now, wall, text))
                for kind in self.counts:  # at most one kind is awaited at a time
                    if f'"type":"{kind}"' in text:
                        self.counts[kind] += 1
                        if self.counts[kind] >= self.expected:
                            self.arrived[kind].set()

    async def open(self, client: Client, since: int | None = None, worker: int | None = None) -> None:
        worker = client.worker if worker is None else worker
        url = f"{self.ws_urls[worker]}/ws/events?token={client.key}" + (f"&since={since}" if since is not None else "")
        async with self.gate:
            client.ws = await connect(url, open_timeout=120, close_timeout=5, ping_interval=None, compression=None,
                                      max_queue=64)
        client.pong = asyncio.Event()
        client.reader = asyncio.create_task(self._read(client))

    async def ping(self, client: Client) -> None:
        assert client.ws is not None
        async with self.gate:
            await client.ws.send('{"type":"ping"}')
            await asyncio.wait_for(client.pong.wait(), timeout=120)

    async def close(self, client: Client) -> None:
        if client.ws is not None:
            async with self.gate:
                with contextlib.suppress(Exception):
                    await client.ws.close()
        if client.reader is not None:
            client.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await client.reader

    async def each(self, fn: Callable[[Client], Any], clients: list[Client], timeout: float) -> list[Any]:
        results: list[Any] = await asyncio.wait_for(
            asyncio.gather(*(fn(c) for c in clients), return_exceptions=True), timeout=timeout)
        return results


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def ms(values: list[float]) -> str:
    if not values:
        return "no samples"
    return (f"p50 {statistics.median(values) * 1e3:8.1f} ms   p95 {p95(values) * 1e3:8.1f} ms   "
            f"max {max(values) * 1e3:8.1f} ms   n={len(values)}")


def patcher_main() -> None:
    """``--patcher``: a helper process that sends the PATCHes, so that their timestamps are
    not delayed by the GIL or the event loop of the process holding the sockets
    (perf_counter is CLOCK_MONOTONIC on Linux: comparable across processes)."""
    for line in sys.stdin:
        job = json.loads(line)
        with httpx.Client(base_url=job["url"], timeout=30) as http:
            http.get("/healthz")  # connection warm
            sent = time.perf_counter()
            response = http.patch(f"/agents/{job['agent_id']}", json={"capability_manifest": job["manifest"]},
                                  headers={"Authorization": f"Bearer {job['key']}"})
            answered = time.perf_counter()
        print(json.dumps({"sent": sent, "answered": answered, "status": response.status_code,
                          "body": response.json()}), flush=True)


class Patcher:
    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None

    async def patch(self, url: str, key: str, agent_id: str,
                    manifest: dict[str, Any]) -> tuple[float, float, dict[str, Any]]:
        if self.process is None:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--patcher", stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE)
        assert self.process.stdin is not None and self.process.stdout is not None
        job = {"url": url, "key": key, "agent_id": agent_id, "manifest": manifest}
        self.process.stdin.write((json.dumps(job) + "\n").encode())
        await self.process.stdin.drain()
        result = json.loads(await asyncio.wait_for(self.process.stdout.readline(), timeout=60))
        assert result["status"] == 200, result
        return result["sent"], result["answered"], result["body"]

    async def close(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), timeout=10)
            if self.process.returncode is None:
                self.process.kill()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def cpu_by_group(worker_pids: list[int]) -> dict[str, float]:
    """CPU seconds so far of this client, each worker, and all postgres / redis processes."""
    groups = {"client": cpu_seconds(os.getpid())}
    for i, pid in enumerate(worker_pids):
        groups[f"worker {i}"] = cpu_seconds(pid)
    for name in ("postgres", "redis-server"):
        total = 0.0
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                with contextlib.suppress(OSError):
                    if (proc / "comm").read_text().strip() == name:
                        total += cpu_seconds(int(proc.name))
        groups[name] = total
    return groups


async def socket_phase(world: World, *, sockets: int, concurrency: int, reconnect: int, deployment: Any,
                       pause: float) -> None:
    keys = await asyncio.to_thread(user_keys, world.user_ids[:sockets])
    swarm = Swarm(deployment.ws_urls, keys, concurrency)
    patcher = Patcher()
    http_a = deployment.urls[0]
    agent_id = world.big_agent
    clients = swarm.clients
    say()
    say(f"(ii) {sockets:,} sockets across {len(deployment.urls)} workers (PostgreSQL + Redis), "
        f"PATCH through worker 0 (from a helper process); client: one asyncio process "
        f"({'uvloop' if loop_factory() else 'asyncio'}), connect concurrency {concurrency}")
    try:
        start = time.perf_counter()
        failures = [r for r in await swarm.each(swarm.open, clients, timeout=900) if isinstance(r, BaseException)]
        connect_seconds = time.perf_counter() - start
        say(f"  connected {sockets - len(failures):,}/{sockets:,} in {connect_seconds:.1f} s "
            f"({(sockets - len(failures)) / connect_seconds:,.0f}/s)"
            + (f"; failures: {sorted({type(f).__name__ + ': ' + str(f)[:80] for f in failures})[:3]}" if failures else ""))
        live = [c for c in clients if c.reader is not None]
        pongs = [r for r in await swarm.each(swarm.ping, live, timeout=300) if isinstance(r, BaseException)]
        say(f"  all registered (ping → pong): {len(live) - len(pongs):,}/{len(live):,}")
        say("  worker RSS after connecting: " + ", ".join(f"{rss_mb(w.process.pid):.0f} MB" for w in deployment.workers))
        # This client holds 10,000 sockets too: its own full collections (~1 s at this heap
        # size) would otherwise land in what is measured from here on.
        gc.collect()
        gc.freeze()

        # A non-breaking change first: every socket gets a real "last id" before the breaking one.
        arrived = swarm.expect("agent.manifest_updated", len(live))
        warm = copy.deepcopy(await asyncio.to_thread(lambda: manifest_at(world.next_step[agent_id] - 1)))
        warm["agent_version"] = "9.9.9"
        sent, answered, body = await patcher.patch(http_a, world.owner_key, agent_id, warm)
        assert not body["breaking_changes"], body
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(arrived.wait(), timeout=30)
        got = [c.received("agent.manifest_updated") for c in live]
        last_ids = {c.index: g[0][2]["id"] for c, g in zip(live, got, strict=True) if g}
        say(f"  non-breaking PATCH (HTTP, {(answered - sent) * 1e3:.0f} ms): agent.manifest_updated reached "
            f"{len(last_ids):,}/{len(live):,}; from response: {ms([g[0][0] - answered for g in got if g])}")

        if pause:
            say(f"  (pausing {pause:.0f} s before the breaking PATCH; worker pids "
                f"{[w.process.pid for w in deployment.workers]}, client pid {os.getpid()})")
            await asyncio.sleep(pause)
        # The breaking change.
        pids = [w.process.pid for w in deployment.workers]
        cpu_before = cpu_by_group(pids)
        breaking = next_manifest(world, agent_id)
        breaking["agent_version"] = "9.9.10"
        arrived = swarm.expect("h2a.reauth_required", len(live))
        sent, answered, body = await patcher.patch(http_a, world.owner_key, agent_id, breaking)
        assert body["breaking_changes"], body
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(arrived.wait(), timeout=30)
        fan_out_wall = time.perf_counter() - sent
        cpu_after = cpu_by_group(pids)
        await asyncio.sleep(2)  # anything duplicated would arrive by now
        firsts = [c.received("h2a.reauth_required") for c in live]
        from_response = [f[0][0] - answered for f in firsts if f]
        from_request = [f[0][0] - sent for f in firsts if f]
        created = {f[0][2]["id"]: f[0][2]["created_at"] for f in firsts if f}
        from_insert = [f[0][1] - datetime.fromisoformat(f[0][2]["created_at"].replace("Z", "+00:00")).timestamp()
                       for f in firsts if f]
        exactly_once = sum(1 for f in firsts if len(f) == 1)
        frame = firsts[0][0][2] if firsts and firsts[0] else {}
        say(f"  breaking PATCH through worker 0 over HTTP: {(answered - sent) * 1e3:.0f} ms "
            f"(breaking: {[c['rule'] for c in body['breaking_changes']]})")
        say(f"  h2a.reauth_required received by {sum(1 for f in firsts if f):,}/{len(live):,} sockets, "
            f"exactly once by {exactly_once:,}; event id(s) {sorted(created)}; data keys {sorted(frame.get('data', {}))}")
        say(f"  time from PATCH response (after commit):     {ms(from_response)}")
        say(f"  time from PATCH request sent:                 {ms(from_request)}")
        say(f"  time from the event's insert (wall clock):    {ms(from_insert)}")
        within = sum(1 for t in from_response if t <= 1.0)
        say(f"  within 1 s of the response: {within:,}/{len(live):,}; target p95 < 1 s: "
            f"{'met' if from_response and p95(from_response) < 1.0 and len(from_response) == len(live) else 'MISSED'}")
        say(f"  measured at load {os.getloadavg()[0]:.2f} (1-minute average)")
        for worker in range(len(deployment.urls)):
            per = [f[0][0] - answered for c, f in zip(live, firsts, strict=True) if f and c.worker == worker]
            say(f"    sockets on worker {worker}: {ms(per)}")
        say(f"  CPU seconds used from the PATCH to the last frame ({fan_out_wall:.2f} s of wall time, "
            f"{os.cpu_count()} cores): " + ", ".join(f"{k} {cpu_after[k] - cpu_before[k]:.2f}" for k in cpu_before))
        dropped = sum(1 for c in live if c.reader is not None and c.reader.done())
        say(f"  sockets closed by the server during the run: {dropped:,}")

        # Reconnect some with since=<last id before the change>, to the other worker.
        chosen = [c for c in live if c.index in last_ids][:reconnect]
        await swarm.each(swarm.close, chosen, timeout=120)
        for c in chosen:
            c.raw = []
        start = time.perf_counter()
        results = await swarm.each(
            lambda c: swarm.open(c, since=last_ids[c.index], worker=(c.worker + 1) % len(swarm.ws_urls)),
            chosen, timeout=120)
        results += await swarm.each(swarm.ping, chosen, timeout=120)
        await asyncio.sleep(1.5)
        errors = [r for r in results if isinstance(r, BaseException)]
        once = sum(1 for c in chosen if [f[2]["type"] for f in c.frames] == ["h2a.reauth_required"]
                   and c.frames[0][2]["id"] in created)
        say(f"  reconnected {len(chosen)} sockets to the other worker with since=<last id>: "
            f"{once}/{len(chosen)} got h2a.reauth_required exactly once and nothing else "
            f"({time.perf_counter() - start:.1f} s{', errors: ' + str(errors[:2]) if errors else ''})")
    finally:
        await patcher.close()
        start = time.perf_counter()
        await swarm.each(swarm.close, clients, timeout=300)
        say(f"  closed all sockets in {time.perf_counter() - start:.1f} s")


# -- main ------------------------------------------------------------------------------


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (uvicorn[standard] brings it): the client is the bottleneck."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def main() -> None:
    parser = argparse.ArgumentParser(description="Breaking manifest changes at scale (PostgreSQL + Redis).")
    parser.add_argument("--relations", type=int, default=100_000, help="live relations of the big agent")
    parser.add_argument("--small", type=int, default=10, help="live relations of the small agent")
    parser.add_argument("--repeat", type=int, default=15, help="timed PATCHes per agent")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--sockets", type=int, default=10_000, help="sockets for (ii); at most --relations")
    parser.add_argument("--concurrency", type=int, default=200, help="sockets connecting at once")
    parser.add_argument("--reconnect", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-sockets", action="store_true", help="only (i)")
    parser.add_argument("--pause-before-patch", type=float, default=0,
                        help="seconds to wait before the breaking PATCH in (ii), e.g. to attach py-spy")
    parser.add_argument("--keep-db", action="store_true", help="keep the bench database afterwards")
    args = parser.parse_args()
    if args.sockets > args.relations:
        parser.error("--sockets cannot exceed --relations (each socket is a user with a live relation)")

    base = postgres_url_or_exit()
    if not args.skip_sockets and not os.environ.get("REDIS_URL"):
        sys.exit("(ii) needs Redis: set REDIS_URL=redis://… (or pass --skip-sockets)")
    if not args.skip_sockets:
        limit = raise_fd_limit(args.sockets + FD_MARGIN)
    name = unquote(urlsplit(base).path.lstrip("/")) + "_reauth_bench"
    url = with_database(base, name)
    recreate_database(base, name)
    try:
        setup_django(url)
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            server = cursor.fetchone()[0]
        say(f"reauth_scale benchmark {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.python_implementation()} "
            f"{platform.python_version()}; {os.cpu_count()} cores; PostgreSQL {server}; "
            f"Redis {'yes' if os.environ.get('REDIS_URL') else 'no'}")
        world = build_world(args.relations, args.small)
        patch_phase(world, repeat=args.repeat, warmup=args.warmup, relations=args.relations, small=args.small)
        if not args.skip_sockets:
            say(f"  (file descriptor limit raised to {limit})")
            connection.close()
            from deploy.local import Deployment

            with Deployment(workers=args.workers, env={"DATABASE_URL": url}, migrate=False) as deployment:
                say(f"  workers: {', '.join(deployment.urls)}; logs in {deployment.log_dir}")
                with asyncio.Runner(loop_factory=loop_factory()) as runner:
                    runner.run(asyncio.wait_for(
                        socket_phase(world, sockets=args.sockets, concurrency=args.concurrency,
                                     reconnect=args.reconnect, deployment=deployment,
                                     pause=args.pause_before_patch), timeout=2400 + args.pause_before_patch))
                crashes = sum(w.log_path.read_text(errors="replace").count("Exception in ASGI application")
                              for w in deployment.workers)
                say(f"  'Exception in ASGI application' in the workers' logs: {crashes}")
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            recreate_database(base, name, drop_only=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text("\n".join(LINES) + "\n")
        print(f"written to {RESULTS.relative_to(ROOT)}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--patcher"]:
        patcher_main()
    else:
        main()
