"""Production settings as the environment makes them: each case is a fresh process (settings
are read once, at import), the way a worker or `manage.py check --deploy` starts."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = "https://hashee.example.com"

# Requests through Django's own stack in that process: the login page, plain and as a
# TLS-terminating proxy forwards it.
REQUESTS = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
seen = {"session_cookie_secure": settings.SESSION_COOKIE_SECURE}
for name, extra in (("plain", {}), ("forwarded_https", {"HTTP_X_FORWARDED_PROTO": "https"})):
    response = Client().get("/portal/login/", **extra)
    seen[name] = {"status": response.status_code, "hsts": response.headers.get("Strict-Transport-Security"),
                  "csrf_cookie_secure": bool(response.cookies["csrftoken"]["secure"])}
print(json.dumps(seen))
"""


def environment(tmp_path: Path, **variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DJANGO_", "HASHEE_", "DATABASE_URL", "REDIS_URL"))}
    env.update({"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "DJANGO_DEBUG": "0",
                "DJANGO_SETTINGS_MODULE": "hashee.settings", **variables})
    return env


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def check_deploy(env: dict[str, str]) -> tuple[int, set[str]]:
    done = run(env, "manage.py", "check", "--deploy")
    output = done.stdout + done.stderr
    return done.returncode, {word.strip("():") for word in output.split() if word.startswith("(") and "." in word}


def requests_under(env: dict[str, str]) -> dict[str, Any]:
    done = run(env, "-c", REQUESTS)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def a_key() -> str:
    return secrets.token_urlsafe(50)


def test_the_development_key_with_debug_off_fails_check_deploy(tmp_path: Path) -> None:
    code, ids = check_deploy(environment(tmp_path))

    assert code != 0 and "hashee.E004" in ids


def test_a_development_machine_or_a_real_key_passes_the_key_check(tmp_path: Path) -> None:
    assert "hashee.E004" not in check_deploy(environment(tmp_path, DJANGO_DEBUG="1"))[1]
    assert "hashee.E004" not in check_deploy(environment(tmp_path, DJANGO_SECRET_KEY=a_key()))[1]


def test_the_server_refuses_to_start_with_the_development_key(tmp_path: Path) -> None:
    done = run(environment(tmp_path), "-m", "uvicorn", "hashee.asgi:application", "--port", "0")

    assert done.returncode != 0
    assert "hashee.E004" in done.stderr and "DJANGO_SECRET_KEY" in done.stderr


def test_an_https_public_url_makes_cookies_secure_and_sends_hsts(tmp_path: Path) -> None:
    env = environment(tmp_path, DJANGO_SECRET_KEY=a_key(), HASHEE_PUBLIC_URL=PUBLIC, DJANGO_ALLOWED_HOSTS="testserver")

    code, ids = check_deploy(env)
    seen = requests_under(dict(env, HASHEE_TRUST_X_FORWARDED_PROTO="1"))

    assert code == 0 and not ids & {"security.W004", "security.W012", "security.W016"}, ids
    assert seen["session_cookie_secure"] is True
    assert seen["forwarded_https"] == {"status": 200, "hsts": "max-age=31536000", "csrf_cookie_secure": True}
    assert seen["plain"]["hsts"] is None  # a request that did not come over https


def test_x_forwarded_proto_is_ignored_unless_the_proxy_is_trusted(tmp_path: Path) -> None:
    seen = requests_under(environment(tmp_path, DJANGO_SECRET_KEY=a_key(), HASHEE_PUBLIC_URL=PUBLIC))

    assert seen["forwarded_https"] == {"status": 200, "hsts": None, "csrf_cookie_secure": True}


@pytest.mark.parametrize("variables", [{"HASHEE_PUBLIC_URL": "http://127.0.0.1:8000"},
                                       {"HASHEE_PUBLIC_URL": PUBLIC, "DJANGO_DEBUG": "1"}],
                         ids=["http public URL", "https in development"])
def test_plain_http_and_development_keep_cookies_usable_over_http(tmp_path: Path, variables: dict[str, str]) -> None:
    seen = requests_under(environment(tmp_path, DJANGO_SECRET_KEY=a_key(), HASHEE_TRUST_X_FORWARDED_PROTO="1",
                                      **variables))

    assert seen["session_cookie_secure"] is False
    assert seen["forwarded_https"] == {"status": 200, "hsts": None, "csrf_cookie_secure": False}
