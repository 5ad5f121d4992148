"""Issue 25, bug 2: a second runtime of an agent without an identity key (another process,
another state directory: another runtime key) on the real server. bob's device pinned the
first runtime's key and refuses the second's calls — and says so at once, so the second
runtime learns within seconds what to fix instead of waiting out its timeout; the SDK warns
when it publishes a key beside others."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import AgentRuntime, KeyPair, LocalStore, ToolCallFailed
from hashee_sdk.agent import SeveralRuntimeKeys
from tests.sdk_trust.test_live_server import Live
from tests.toolcalls.test_roundtrip import ApiClientTransport, run

pytestmark = pytest.mark.django_db(transaction=True)
PROMPT_S = 5.0  # "within seconds": far below the call's timeout
CALL_TIMEOUT_S = 20.0


@pytest.fixture
def live(alice: Any, bob: Any, manifest: dict[str, Any], tmp_path: Path) -> Live:
    return Live(alice, bob, manifest, tmp_path)


def second_runtime(live: Live) -> AgentRuntime:
    """The same agent, another state directory: another key pair."""
    return AgentRuntime(transport=ApiClientTransport(live.agent_key), agent_id=str(live.agent.pk),
                        keys=KeyPair.generate(), manifest=live.manifest, store=LocalStore.in_memory())


def test_the_second_runtimes_call_is_refused_within_seconds_naming_the_remedy(live: Live) -> None:
    first = live.runtime(live.manifest)
    assert run(lambda: live.call(first, "send_notification", {"title": "hello"})).ok  # bob's device pins its key
    second, asked = second_runtime(live), len(live.approver.asked)

    started = time.monotonic()
    with pytest.warns(SeveralRuntimeKeys):
        result = run(lambda: live.call(second, "send_notification", {"title": "again"}))
    elapsed = time.monotonic() - started

    assert (result.status, result.reason) == ("denied", "runtime_key_unpinned")
    assert elapsed < PROMPT_S < CALL_TIMEOUT_S
    with pytest.raises(ToolCallFailed) as failed:
        result.unwrap()
    assert "identity key" in str(failed.value) and "one state directory" in str(failed.value)
    assert live.ran == [{"title": "hello"}]  # the second call ran nothing, asked nothing
    assert live.refusals() == ["runtime_key_unpinned"]
    assert len(live.approver.asked) == asked


def test_the_same_call_delivered_again_is_answered_once(live: Live) -> None:
    first = live.runtime(live.manifest)
    assert run(lambda: live.call(first, "send_notification", {"title": "hello"})).ok
    second = second_runtime(live)
    with pytest.warns(SeveralRuntimeKeys):
        assert run(lambda: live.call(second, "send_notification", {"title": "again"})).reason == "runtime_key_unpinned"

    async def redelivered() -> int:
        restarted = live.start_client()  # forgets what it delivered, not what its replay record holds
        await restarted.poll(0)
        return len(await _responses(live))

    answers_before = run(lambda: _responses(live))
    assert run(redelivered) == len(answers_before)  # no second denial for the same call


def test_publishing_a_runtime_key_beside_another_live_one_warns_with_the_remedy(live: Live) -> None:
    first = live.runtime(live.manifest)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SeveralRuntimeKeys)  # the first runtime is alone: no warning
        run(first.register_key)
        run(first.register_key)  # and the same key again (a restart from the same state directory)

    with pytest.warns(SeveralRuntimeKeys) as warned:
        run(second_runtime(live).register_key)

    [message] = [str(w.message) for w in warned if w.category is SeveralRuntimeKeys]
    assert "no identity key" in message and "1 other live runtime key" in message
    assert "give the agent an identity key" in message and "one state directory" in message


async def _responses(live: Live) -> list[Any]:
    from channels.db import database_sync_to_async

    from toolcalls.models import Message

    return await database_sync_to_async(lambda: list(Message.objects.filter(msg_subtype="artifact_response")))()
