"""Request ids and JSON log lines (SPEC §11): one object per line, never a secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from agents.models import Agent
from hashee.logredact import RedactTokens
from hashee.requestlog import JsonFormatter, RequestIdFilter

SECRET_KEY = "hsk_" + "A1b2C3d4" * 4


@pytest.fixture
def json_lines(settings: Any) -> Iterator[io.StringIO]:
    """The root logger's lines as the server writes them with HASHEE_LOG_FORMAT=json."""
    settings.HASHEE_LOG_FORMAT = "json"  # read when a client first loads the middleware
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    handler.addFilter(RedactTokens())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.django_db
def test_every_response_carries_a_new_request_id() -> None:
    first, second = Client().get("/healthz"), Client().get("/no/such/page")
    assert len(first["X-Request-ID"]) == 32 and second["X-Request-ID"]
    assert first["X-Request-ID"] != second["X-Request-ID"]


@pytest.mark.django_db
def test_a_sane_incoming_request_id_is_echoed() -> None:
    incoming = "9f1c2d3e-4b5a-6789-abcd-ef0123456789"
    assert Client().get("/healthz", headers={"X-Request-ID": incoming})["X-Request-ID"] == incoming


@pytest.mark.django_db
@pytest.mark.parametrize("incoming", ["short", "x" * 200, 'a" injected="1', "line\u2028break-1234", "spaces here ok?"])
def test_mallorys_odd_request_id_is_replaced(incoming: str) -> None:
    answered = Client().get("/healthz", headers={"X-Request-ID": incoming})["X-Request-ID"]
    assert answered != incoming and len(answered) == 32


@pytest.mark.django_db
def test_a_request_writes_one_json_line_with_its_route_and_id(json_lines: io.StringIO, agent: Agent) -> None:
    response = Client().get(f"/agents/{agent.pk}")
    [line] = [line for line in lines(json_lines) if line["logger"] == "hashee.request"]
    assert set(line) == {"time", "level", "logger", "message", "request_id", "method", "route", "status",
                         "duration_ms"}
    assert line["request_id"] == response["X-Request-ID"]
    assert (line["method"], line["route"], line["status"]) == ("GET", "agent", response.status_code)
    assert str(agent.pk) not in json.dumps(line)  # the route name, not the path
    assert line["level"] == "INFO" and line["time"].endswith("+00:00")


@pytest.mark.django_db
def test_lines_written_during_a_request_carry_its_id(json_lines: io.StringIO) -> None:
    response = Client().get("/no/such/page", headers={"X-Request-ID": "trace-0123456789"})
    warnings = [line for line in lines(json_lines) if line["logger"] == "django.request"]
    assert warnings and all(line["request_id"] == "trace-0123456789" for line in warnings)
    assert response["X-Request-ID"] == "trace-0123456789"


@pytest.mark.django_db
def test_no_secret_or_payload_reaches_a_json_line(json_lines: io.StringIO, agent_api: APIClient,
                                                  relation: Any) -> None:
    payload = {"v": 1, "ciphertext": "PAYLOAD-CIPHERTEXT-MARKER", "nonce": "n"}
    agent_api.post(f"/h2a/relations/{relation.pk}/messages", {"msg_subtype": "artifact_tool_call",
                   "content_type": "artifact", "payload": payload}, format="json")
    Client().get(f"/no/such/page?token={SECRET_KEY}", headers={"Authorization": f"Bearer {SECRET_KEY}"})
    logger = logging.getLogger("hashee.anything")
    logger.warning("fetching %s", f"https://hooks.example/in?access_token={SECRET_KEY}")
    try:
        raise ValueError(f"bad key {SECRET_KEY}")
    except ValueError:
        logger.exception("failed")
    text = json_lines.getvalue()
    assert lines(json_lines)  # every line is one JSON object
    assert "A1b2C3d4" not in text and "PAYLOAD-CIPHERTEXT-MARKER" not in text
    assert "[redacted]" in text


def test_the_json_formatter_redacts_even_without_the_filter() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "key %s", (SECRET_KEY,), None)
    assert SECRET_KEY not in JsonFormatter().format(record)


def test_plain_logs_leave_the_request_line_to_uvicorns_access_log(caplog: pytest.LogCaptureFixture,
                                                                  settings: Any) -> None:
    settings.HASHEE_LOG_FORMAT = "plain"

    with caplog.at_level(logging.INFO, logger="hashee.request"):
        response = APIClient().get("/api/ping")

    assert response["X-Request-ID"]  # the id is there all the same
    assert [r for r in caplog.records if r.name == "hashee.request"] == []
