"""Event-log writes as writers grow, on a durable PostgreSQL (fsync and synchronous_commit on).

Run: .venv/bin/python bench/eventlog_writers.py [--seconds 4] [--rounds 2]

Starts a PostgreSQL cluster of its own (initdb in a temporary directory on disk, 127.0.0.1
on a free port, fsync=on, synchronous_commit=on, full_page_writes=on; stopped and removed
after), migrates the schema, and runs 1, 2, 4 and 8 writer processes (Python, Django, one
connection each), each writing events as ``event_emit`` does: BEGIN, the event's insert
(eventlog.statements.event_insert), COMMIT. Three variants of the same statement, only its
lock differs, interleaved in one run on the same writers:

* before   — the log's lock taken exclusive (the statement as it was before issue 27:
             ids committed in order, every writer of the deployment serialised);
* after    — the log's lock taken in share mode (writers do not wait for each other;
             readers stop at the completed-up-to position, eventlog.watermark);
* unlocked — no lock at all (the ceiling of this disk and these cores).

Prints events/s per variant and writer count (the median of the rounds) with the 1-minute
load average beside each figure: other work on the machine takes the same cores. Then the
same statement from pgbench (C clients, no Python: what PostgreSQL itself sustains on this
disk), to show how the ceiling grows with clients. Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "sdk"))
sys.path.insert(0, str(ROOT / "bench"))

from _stats import load  # noqa: E402

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
VARIANTS = ("before", "after", "unlocked")
WRITERS = (1, 2, 4, 8)
SHARED = "pg_advisory_xact_lock_shared(%s)"
# The same statement with the lock taken as it was before (exclusive), or not at all.
REWRITES = {"before": "pg_advisory_xact_lock(%s)", "after": SHARED, "unlocked": "%s::bigint"}
EVENT_LOG_LOCK = 0x4841534845  # eventlog.statements.EVENT_LOG_LOCK (imported there only after Django is set up)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg(*command: str, check: bool = True) -> None:
    """Run a PostgreSQL program (as the postgres user when we are root: initdb refuses root)."""
    argv = [str(PG_BIN / command[0]), *command[1:]]
    subprocess.run(["runuser", "-u", "postgres", "--", *argv] if os.getuid() == 0 else argv, check=check,
                   stdout=subprocess.DEVNULL, cwd="/")


@contextmanager
def durable_postgres() -> Iterator[str]:
    """A PostgreSQL cluster of its own that commits durably; yields its URL."""
    base = Path(tempfile.mkdtemp(prefix="hashee-eventlog-bench."))
    data = base / "pg"
    if os.getuid() == 0:
        shutil.chown(base, "postgres")
    port = _free_port()
    _pg("initdb", "-D", str(data), "-U", "hashee", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c max_connections=50 -c fsync=on "
               "-c synchronous_commit=on -c full_page_writes=on")
    _pg("pg_ctl", "-D", str(data), "-l", str(data / "server.log"), "-w", "-t", "60", "-o", options, "start")
    try:
        _pg("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "hashee", "hashee")
        yield f"postgres://hashee@127.0.0.1:{port}/hashee"
    finally:
        _pg("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(base, ignore_errors=True)


def _django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hashee.settings")
    import django

    django.setup()


def _writer(url: str, user_id: int, orders: Any, results: Any) -> None:
    """One writer process: for each order (variant, start time, seconds), write events
    until the time is up and report how many committed."""
    _django(url)
    from django.db import connection, transaction

    from eventlog import statements
    from eventlog.models import Event

    variant = ["after"]

    def rewrite(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        return execute(sql.replace(SHARED, REWRITES[variant[0]], 1), params, many, context)

    with connection.execute_wrapper(rewrite):
        while (order := orders.get()) is not None:
            variant[0], start, seconds = order
            while time.time() < start:
                time.sleep(0.001)
            done, end = 0, start + seconds
            while time.time() < end:
                with transaction.atomic():
                    statements.event_insert(Event(type="agent.telemetry_warning", data={"n": done}, user_id=user_id),
                                            stamp=None, audience_id=None)
                done += 1
            results.put(done)
    connection.close()


def measure(url: str, *, seconds: float, rounds: int) -> dict[tuple[str, int], list[tuple[float, str]]]:
    _django(url)
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    user_id = User.objects.create(username=f"writer-{int(time.time())}").pk
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW fsync")
        fsync = cursor.fetchone()[0]
        cursor.execute("SHOW synchronous_commit")
        synchronous = cursor.fetchone()[0]
    connection.close()
    print(f"PostgreSQL of its own: fsync={fsync}, synchronous_commit={synchronous}, {os.cpu_count()} cores")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    orders = [context.Queue() for _ in range(max(WRITERS))]
    processes = [context.Process(target=_writer, args=(url, user_id, queue, results)) for queue in orders]
    for process in processes:
        process.start()
    figures: dict[tuple[str, int], list[tuple[float, str]]] = {}
    try:
        for queue in orders:  # a first short run: every writer connected and warm
            queue.put(("after", time.time() + 3, 0.5))
        for _ in orders:
            results.get(timeout=120)
        for _ in range(rounds):
            for writers in (1, 8, 2, 4):  # the two ends of the comparison first, close in time
                for variant in VARIANTS:
                    start = time.time() + 0.2
                    for queue in orders[:writers]:
                        queue.put((variant, start, seconds))
                    done = sum(results.get(timeout=seconds + 120) for _ in range(writers))
                    figures.setdefault((variant, writers), []).append((done / seconds, load()))
    finally:
        for queue in orders:
            queue.put(None)
        for process in processes:
            process.join(30)
    return figures


def report(figures: dict[tuple[str, int], list[tuple[float, str]]]) -> None:
    def rate(variant: str, writers: int) -> float:
        return statistics.median(r for r, _ in figures[(variant, writers)])

    print(f"\n{'writers':>7}  " + "  ".join(f"{v + ' ev/s':>14}" for v in VARIANTS) + "  after/before  loads")
    for writers in WRITERS:
        loads = ", ".join(sorted({ld for v in VARIANTS for _, ld in figures[(v, writers)]}))
        print(f"{writers:>7}  " + "  ".join(f"{rate(v, writers):>14.0f}" for v in VARIANTS)
              + f"  {rate('after', writers) / rate('before', writers):>11.2f}x  {loads}")
    def per_round(numerator: tuple[str, int], denominator: tuple[str, int]) -> str:
        """The median of each round's own ratio (a round's figures were taken within a
        minute of each other: the disk's flush time drifts more than that between rounds)."""
        ratios = [a / b for (a, _), (b, _) in zip(figures[numerator], figures[denominator], strict=True) if b]
        return f"{statistics.median(ratios):.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratios)})"

    for variant in VARIANTS:
        print(f"{variant}: 8 writers / 1 writer = {rate(variant, 8) / rate(variant, 1):.2f}x of the medians, "
              f"{per_round((variant, 8), (variant, 1))} by round")
    print(f"after / before at 8 writers, by round: {per_round(('after', 8), ('before', 8))}")
    print(f"after / unlocked at 8 writers, by round: {per_round(('after', 8), ('unlocked', 8))}")
    print("each figure: the median of the rounds; every round's figure with its load:")
    for (variant, writers), samples in sorted(figures.items(), key=lambda item: (item[0][1], item[0][0])):
        print(f"  {variant:<9} {writers} writers: " + ", ".join(f"{r:.0f} ({ld})" for r, ld in samples))


PGBENCH_CLIENTS = (1, 2, 4, 8, 16)
# The event's statement as eventlog.statements writes it (the lock rewritten per variant),
# one transaction each, as event_emit commits it.
PGBENCH_SCRIPT = """BEGIN;
WITH log_lock AS MATERIALIZED (SELECT {lock}), new_event AS (INSERT INTO hashee_event (type, data, user_id,
  agent_id, audience_id, created_at) SELECT 'agent.telemetry_warning', '{{}}'::jsonb, {user_id}, NULL, NULL, now()
  FROM log_lock RETURNING id) SELECT id FROM new_event;
END;
"""


def pgbench(url: str, *, seconds: float) -> None:
    """The same statement from pgbench clients: PostgreSQL's own ceiling on this disk."""
    import re

    port = url.rsplit(":", 1)[1].split("/")[0]
    user_id = subprocess.run([str(PG_BIN / "psql"), "-h", "127.0.0.1", "-p", port, "-U", "hashee", "-tAc",
                              "SELECT min(id) FROM auth_user", "hashee"], check=True, capture_output=True,
                             text=True).stdout.strip()
    print(f"\npgbench (the same statement, one transaction each, {seconds:.0f} s per figure):")
    print(f"{'clients':>7}  " + "  ".join(f"{v + ' ev/s':>14}" for v in VARIANTS) + "  after/before  loads")
    with tempfile.TemporaryDirectory() as scripts:
        for clients in PGBENCH_CLIENTS:
            rates, loads = [], []
            for variant in VARIANTS:
                lock = REWRITES[variant].replace("%s", str(EVENT_LOG_LOCK))
                script = Path(scripts) / f"{variant}.sql"
                script.write_text(PGBENCH_SCRIPT.format(lock=lock, user_id=user_id))
                out = subprocess.run([str(PG_BIN / "pgbench"), "-h", "127.0.0.1", "-p", port, "-U", "hashee", "-n",
                                      "-c", str(clients), "-j", str(min(clients, 4)), "-T", str(int(seconds)),
                                      "-f", str(script), "hashee"], check=True, capture_output=True, text=True).stdout
                found = re.search(r"tps = ([0-9.]+)", out)
                rates.append(float(found.group(1)) if found else 0.0)
                loads.append(load())
            print(f"{clients:>7}  " + "  ".join(f"{r:>14.0f}" for r in rates)
                  + f"  {rates[1] / rates[0]:>11.2f}x  {', '.join(sorted(set(loads)))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each measured run")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every variant and writer count")
    args = parser.parse_args()
    print(f"Event-log writers on a durable PostgreSQL ({load()} at the start)")
    with durable_postgres() as url:
        report(measure(url, seconds=args.seconds, rounds=args.rounds))
        pgbench(url, seconds=max(args.seconds, 3))


if __name__ == "__main__":
    main()
