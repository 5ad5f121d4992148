"""Socket tokens in query strings never reach a log line."""

from __future__ import annotations

import logging

import pytest

from hashee.logredact import RedactTokens, install, redact


def test_tokens_are_redacted_wherever_they_sit_in_a_query() -> None:
    assert redact("/ws/events?token=hsk_abc-DEF_123") == "/ws/events?token=[redacted]"
    assert redact("/ws/agent?since=4&token=hak_x&y=1") == "/ws/agent?since=4&token=[redacted]&y=1"
    assert redact('"WebSocket /ws/events?token=hsk_a" [accepted]') == '"WebSocket /ws/events?token=[redacted]" [accepted]'
    assert redact("/ws/events?since=3") == "/ws/events?since=3"


def test_the_servers_loggers_redact_their_arguments(caplog: pytest.LogCaptureFixture) -> None:
    install()
    install()  # idempotent
    logger = logging.getLogger("uvicorn.error")
    assert sum(isinstance(f, RedactTokens) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="uvicorn.error"):
        logger.info('%s - "WebSocket %s" [accepted]', "127.0.0.1:5000", "/ws/events?token=hsk_secret")
    assert "hsk_secret" not in caplog.text and "token=[redacted]" in caplog.text


def test_oauth_token_parameters_and_bare_secrets_are_redacted() -> None:
    hat, hak = "hat_" + "a1B2-c3_" * 5, "hak_" + "Zz09" * 10
    assert redact(f"/oauth/token?subject_token={hak}&scope=x") == "/oauth/token?subject_token=[redacted]&scope=x"
    assert redact(f"/cb?access_token={hat}") == "/cb?access_token=[redacted]"
    assert redact(f"/ws/agent?token={hat}") == "/ws/agent?token=[redacted]"
    assert redact(f"Authorization: Bearer {hat} and {hak}") == "Authorization: Bearer hat_[redacted] and hak_[redacted]"
    assert redact("/ws/agent?since=3&notatoken=1") == "/ws/agent?since=3&notatoken=1"
