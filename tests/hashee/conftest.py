"""The webhook receiver the event log's tests use also serves the metrics tests here."""

from tests.eventlog.conftest import allow_private, observed_agent, receiver  # noqa: F401
