"""Django's PostgreSQL backend, with a health check that costs no round trip.

With ``CONN_HEALTH_CHECKS`` Django runs ``SELECT 1`` before the first query of every
request on a persistent connection: a round trip, and a statement for PostgreSQL, per
request (~10% of the worker's CPU for a relayed message, measured in bench/relay.py).
An idle connection has nothing to read, so a connection whose server hung up (a restart,
``pg_terminate_backend``, an idle timeout) is one whose socket is readable. The check
here polls the socket without waiting; only when the server has said something unasked
does it fall back to Django's ``SELECT 1`` to learn whether that was a goodbye or a
notice. After a failed query Django still checks with ``SELECT 1`` (``is_usable``).
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    health_check_done: bool
    health_check_enabled: bool  # set by Django's __init__ (CONN_HEALTH_CHECKS); the stub omits it

    def close_if_health_check_failed(self) -> None:
        if (self.pool or self.connection is None or not self.health_check_enabled or self.health_check_done
                or not hasattr(select, "poll")):  # Windows has no poll(): Django's SELECT 1 there
            return super().close_if_health_check_failed()
        if not self.still_connected():
            self.close()
        self.health_check_done = True

    def still_connected(self) -> bool:
        if self.connection is None or self.connection.closed:
            return False
        pgconn = self.connection.pgconn
        if pgconn.status != pq.ConnStatus.OK:
            return False
        poller = select.poll()  # not select.select: a socket's descriptor may be above 1023
        poller.register(pgconn.socket, select.POLLIN)
        if poller.poll(0):
            return bool(self.is_usable())
        return True
