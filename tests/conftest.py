"""Personas: alice owns, bob uses, mallory intrudes (STYLE.md)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from rest_framework.test import APIClient

from agents import services as agent_services
from agents.apikey_services import api_key_create
from agents.management.commands.seed_demo import DEMO_MANIFEST
from agents.models import Agent
from relations import services as relation_services
from relations.models import Relation


def pytest_configure(config: Any) -> None:
    from django.conf import settings

    # The suite runs with DEBUG off, as production does, but it is no deployment: it signs
    # with a key of its own, not the public development key a server refuses to start with.
    settings.SECRET_KEY = "tests-" + "k" * 50
    settings.HASHEE_CHECK_EVENT_ORDER = True  # a write after an event fails the test (eventlog.ordering)
    test_name = settings.DATABASES["default"].get("TEST", {}).get("NAME")
    if test_name:  # the SQLite test database file lives under .run/
        Path(test_name).parent.mkdir(parents=True, exist_ok=True)


# Modules whose tests share a live server, a browser page or a device process through
# module-scoped fixtures, and run in their written order (a later test reads what an earlier one
# did: a once grant used, then withdrawn). Under xdist each such module goes to one worker whole
# and in order, not split across two, each starting a server of its own; every other test is
# scheduled alone, as xdist's "load" does. (xdist's own --dist loadgroup reads marks through
# Item._nodeid, which pytest 9 no longer uses for the node id.)
IN_ORDER = ("tests/e2e/", "tests/interop/", "tests/hostile/")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class InOrderModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module.startswith(IN_ORDER) else nodeid

    return InOrderModules(config, log)


@pytest.fixture(scope="session", autouse=True)
def no_stray_connections_at_teardown(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """Sockets' database_sync_to_async threads keep their connections to the test database;
    end them before pytest-django drops it (PostgreSQL refuses to drop a database in use)."""
    yield
    from django.db import connection

    if connection.vendor == "postgresql":
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")


@pytest.fixture
def wsgi_keeps_the_test_connection() -> Iterator[None]:
    """The WSGI handler closes the connection after each request when it is inside a
    transaction, as the test's is: switch that off, as Django's test client does."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture(autouse=True)
def state_dir_of_the_test(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device or runtime built without a store writes to the state directory: never the
    home directory of whoever runs the tests."""
    monkeypatch.setenv("HASHEE_STATE_DIR", str(tmp_path_factory.mktemp("hashee-state")))


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def manifest() -> dict[str, Any]:
    return copy.deepcopy(DEMO_MANIFEST)


def _user(username: str) -> User:
    return User.objects.create_user(username=username, password="pw-" + username)


@pytest.fixture
def alice(db: Any) -> User:
    return _user("alice")


@pytest.fixture
def bob(db: Any) -> User:
    return _user("bob")


@pytest.fixture
def mallory(db: Any) -> User:
    return _user("mallory")


@pytest.fixture
def agent(alice: User, manifest: dict[str, Any]) -> Agent:
    """alice's DemoBot (the demo manifest)."""
    return agent_services.agent_create(owner=alice, name="DemoBot", capability_manifest=manifest)[0]


@pytest.fixture
def relation(bob: User, agent: Agent) -> Relation:
    """bob's live relation with DemoBot, filesystem:read granted."""
    return relation_services.relation_create(user=bob, agent_id=agent.pk, granted_scopes=["filesystem:read"])


@pytest.fixture
def agent_api(agent: Agent) -> APIClient:
    """DemoBot's runtime: an agent key of alice's."""
    return client_for(secret=api_key_create(user=agent.owner, agent=agent)[1])


def client_for(user: User | None = None, secret: str | None = None) -> APIClient:
    client = APIClient()
    if user is not None and secret is None:
        _, secret = api_key_create(user=user)
    if secret is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def operator(db: Any) -> Client:
    """A logged-in superuser in the Django admin."""
    User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.login(username="root", password="pw")
    return client


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


@pytest.fixture
def alice_api(alice: User) -> APIClient:
    return client_for(alice)


@pytest.fixture
def bob_api(bob: User) -> APIClient:
    return client_for(bob)


@pytest.fixture
def mallory_api(mallory: User) -> APIClient:
    return client_for(mallory)
