"""Grant options on bob's device (SPEC §5.2, issue 26), through the fake server and against
a lying one: "only this time", "until", narrowed arguments and the 90-day notice. The device
enforces what bob's newest verified statement says, whatever the server says over it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import ConsentUnverified
from hashee_sdk.agent_tools import AgentToolList
from hashee_sdk.core.event_types import EventType
from hashee_sdk.grants import Notice
from tests.sdk.fakes import AGENT_ID, AGENT_NAME, ALL_SCOPES, RELATION_ID, FakeTransport
from tests.sdk.test_client import T0, T0_MS
from tests.sdk_trust.scene import Scene, run
from tests.sdk_trust.test_consent_trust import relation_says
from tests.sdk_trust.test_lying_server import settle_relation, statuses, widened_path

ONCE = {"location:read": {"once": True}}
DOCS_ONLY = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^/home/bob/docs/"}},
             "required": ["path"]}
NARROWED = {"filesystem:read": {"arguments": {"read_file": DOCS_ONLY}}}
DAY = 86400.0


def told(scene: Scene) -> list[Notice]:
    notices: list[Notice] = []
    scene.client.on_notice = notices.append
    return notices


def last_statement(scene: Scene) -> dict[str, Any]:
    """The statement of the server's last signed change."""
    assert scene.server.consent_statement is not None
    return dict(scene.server.consent_statement["statement"])


def patches(scene: Scene) -> list[dict[str, Any]]:
    """The PATCH bodies bob's device sent."""
    transport = scene.user_side.inner
    assert isinstance(transport, FakeTransport)
    return [body for method, _, body in transport.requests if method == "PATCH"]


# --- only this time -----------------------------------------------------------------------


def test_a_once_grant_answers_one_call_and_the_device_withdraws_it_signed() -> None:
    scene = Scene()
    granted = run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))

    first = run(scene.call("locate", {}))
    second = run(scene.call("locate", {}))

    assert granted["consent_statement"]["statement"]["grant_options"] == ONCE  # signed as sent
    assert statuses(first, second) == [("ok", None), ("denied", "scope_not_granted")]
    assert scene.handlers.calls == [("locate", {})]
    withdrawal = last_statement(scene)
    assert (withdrawal["granted_scopes"], withdrawal["grant_options"]) == (["filesystem:read", "notification:send"], {})
    assert "location:read" not in scene.server.granted
    assert withdrawal["acknowledged_manifest_version"] == 1 and withdrawal["seq"] > granted["consent_statement"][
        "statement"]["seq"]


def test_the_withdrawal_keeps_the_other_scopes_options() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options={**ONCE, **NARROWED}))

    run(scene.call("locate", {}))

    assert last_statement(scene)["grant_options"] == NARROWED
    assert scene.server.grant_options == NARROWED


@pytest.mark.parametrize("lie", ["options dropped, the once statement replayed", "options dropped, no statement",
                                 "options emptied", "options null", "another scope's options"])
def test_a_used_once_grant_stays_refused_when_the_server_reports_it_granted_again(lie: str) -> None:
    scene = Scene()
    once = run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))["consent_statement"]
    run(scene.call("locate", {}))
    lies = {
        "options dropped, the once statement replayed": relation_says(granted_scopes=ALL_SCOPES, grant_options=...,
                                                                      consent_statement=once),
        "options dropped, no statement": relation_says(granted_scopes=ALL_SCOPES, grant_options=...,
                                                       consent_statement=None),
        "options emptied": relation_says(granted_scopes=ALL_SCOPES, grant_options={}),
        "options null": relation_says(granted_scopes=ALL_SCOPES, grant_options=None),
        "another scope's options": relation_says(granted_scopes=ALL_SCOPES,
                                                 grant_options={"notification:send": {"once": True}}),
    }
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", lies[lie])
    scene.client._invalidate(RELATION_ID)

    result = run(scene.call("locate", {}))

    assert statuses(result) == [("denied", "scope_not_granted")]
    assert scene.handlers.calls == [("locate", {})]


def test_a_used_once_grant_stays_used_across_a_restart_when_the_withdrawal_failed(tmp_path: Path) -> None:
    scene = Scene(state=tmp_path)
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))
    scene.server.offline = True
    notices = told(scene)

    first = run(scene.call("locate", {}))
    scene.client = scene.start_client()  # the device restarts; the server still says once, unused
    second = run(scene.call("locate", {}))

    assert statuses(first, second) == [("ok", None), ("denied", "scope_not_granted")]
    assert scene.server.granted == sorted(ALL_SCOPES) and scene.server.grant_options == ONCE
    assert [(n.kind, n.scope) for n in notices] == [("once_not_withdrawn", "location:read")]  # before the restart
    assert "only this time and has been used" in notices[0].text


def test_a_withdrawal_refused_for_a_new_version_is_left_out_of_bobs_next_consent() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))
    run(scene.call("notify", {"title": "look"}))
    newer = scene.server.manifest | {"agent_version": "1.0.1"}
    scene.server.publish(newer)  # not breaking: the relation stays active, on version 1
    notices = told(scene)

    answered = run(scene.call("locate", {}))  # the agent still calls under version 1
    refused = [body for body in patches(scene) if body["granted_scopes"] == ["filesystem:read", "notification:send"]]
    again = run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))  # copied from before

    assert statuses(answered) == [("ok", None)] and refused  # tried, VERSION_CONFLICT
    assert [n.kind for n in notices] == ["once_not_withdrawn"]
    assert again["granted_scopes"] == ["filesystem:read", "notification:send"]
    assert again["consent_statement"]["statement"]["grant_options"] == {}


def test_two_calls_of_a_once_grant_at_the_same_time_run_one() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))

    async def both() -> list[Any]:
        first = scene.agent.call_tool(RELATION_ID, "locate", {}, timeout=2)
        second = scene.agent.call_tool(RELATION_ID, "locate", {}, timeout=2)
        tasks = [asyncio.create_task(first), asyncio.create_task(second)]
        while len(scene.server.messages) < 2:
            await asyncio.sleep(0.002)
        calls = [scene.server.frame(0), scene.server.frame(1)]
        await asyncio.gather(*(scene.client.handle_frame(frame) for frame in calls))
        for index in range(2, len(scene.server.messages)):
            await scene.agent.handle_frame(scene.server.frame(index))
        return list(await asyncio.gather(*tasks))

    results = run(both())

    assert sorted(statuses(*results), key=str) == [("denied", "scope_not_granted"), ("ok", None)]
    assert scene.handlers.calls == [("locate", {})]


def test_an_unsigned_once_grant_from_the_server_is_applied_and_withdrawn_signed() -> None:
    scene = Scene()
    scene.server.grant_options = {"notification:send": {"once": True}}  # given on the web, unsigned

    first = run(scene.call("notify", {"title": "a"}))
    second = run(scene.call("notify", {"title": "b"}))

    assert statuses(first, second) == [("ok", None), ("denied", "scope_not_granted")]
    assert last_statement(scene)["granted_scopes"] == ["filesystem:read", "location:read"]


# --- until --------------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["honest", "keeps it granted, until dropped"])
def test_past_until_by_the_devices_clock_a_call_is_scope_not_granted(server: str) -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES,
                               grant_options={"notification:send": {"until": T0_MS + 3600_000}}))
    if server != "honest":
        scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", relation_says(grant_options={}))

    before = run(scene.call("notify", {"title": "in time"}))
    scene.clock.now = T0 + 3600
    after = run(scene.call("notify", {"title": "too late"}))

    assert statuses(before, after) == [("ok", None), ("denied", "scope_not_granted")]
    assert scene.handlers.calls == [("notify", {"title": "in time"})]


# --- narrowed arguments ---------------------------------------------------------------------


@pytest.mark.parametrize("server", ["honest", "drops the narrowing", "swaps in a wider one", "replays no statement"])
def test_a_narrowed_read_file_answers_inside_and_refuses_outside_with_details(server: str) -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=NARROWED))
    lies = {"drops the narrowing": relation_says(grant_options=...),
            "swaps in a wider one": relation_says(grant_options={"filesystem:read": {"arguments": {
                "read_file": {"type": "object"}}}}),
            "replays no statement": relation_says(grant_options={}, consent_statement=None)}
    if server in lies:
        scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", lies[server])

    inside = run(scene.call("read_file", {"path": "/home/bob/docs/plan.txt"}))
    outside = run(scene.call("read_file", {"path": "/etc/passwd"}))

    assert statuses(inside, outside) == [("ok", None), ("denied", "scope_not_granted")]
    assert [(d["path"], d["code"]) for d in outside.details] == [("/arguments/path", "PATTERN_MISMATCH")]
    assert scene.handlers.calls == [("read_file", {"path": "/home/bob/docs/plan.txt"})]
    told_bob = scene.refusals().count("consent_unverified")  # the server's options are not what bob signed
    assert told_bob == (0 if server == "honest" else 1)


def test_the_prompt_says_in_words_how_the_scope_was_granted() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options={**NARROWED, **ONCE}))

    run(scene.call("read_file", {"path": "/home/bob/docs/plan.txt"}))
    run(scene.call("locate", {}))

    assert [p.grant for p in scene.prompt.asked] == ["read_file only when path starts with /home/bob/docs/",
                                                     "only this time"]


# --- the 90-day notice ----------------------------------------------------------------------


def test_a_high_grant_unused_for_90_days_is_told_and_withdrawn_on_request() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES))  # signed at T0
    run(scene.call("notify", {"title": "low scopes do not count"}))
    notices = told(scene)

    at_89 = run(scene.client.unused_grants(now=T0 + 89 * DAY))
    at_90 = run(scene.client.unused_grants(now=T0 + 90 * DAY))
    run(scene.client.unused_grants(now=T0 + 91 * DAY))  # told once
    scene.clock.now = T0 + 90 * DAY
    relation = run(scene.client.withdraw(RELATION_ID, "location:read"))

    assert at_89 == []
    assert [(u.relation_id, u.agent_id, u.scope, u.since) for u in at_90] == [
        (RELATION_ID, AGENT_ID, "location:read", T0)]
    assert [n.text for n in notices] == [f"{AGENT_NAME} has not used location:read for 90 days. You can withdraw "
                                         "it: it is asked again if the agent needs it later."]
    assert relation["granted_scopes"] == ["filesystem:read", "notification:send"]
    assert run(scene.client.unused_grants(now=T0 + 200 * DAY)) == []


def test_answering_a_call_restarts_the_90_days() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES))
    scene.clock.now = T0 + 60 * DAY
    run(scene.call("locate", {}))

    assert run(scene.client.unused_grants(now=T0 + 140 * DAY)) == []
    assert [u.since for u in run(scene.client.unused_grants(now=T0 + 150 * DAY))] == [T0 + 60 * DAY]


def test_an_unsigned_grant_counts_from_when_the_device_first_saw_it(tmp_path: Path) -> None:
    scene = Scene(state=tmp_path)
    run(scene.client.relation(RELATION_ID))  # first look at T0: granted on the web
    scene.client = scene.start_client()  # remembered across a restart

    found = run(scene.client.unused_grants(now=T0 + 90 * DAY))

    assert [(u.scope, u.since) for u in found] == [("location:read", T0)]


def test_a_relation_event_with_options_changes_what_the_device_enforces() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=NARROWED))
    run(scene.client.handle_frame(scene.server.relation_frame(EventType.RELATION_UPDATED)))

    result = run(scene.call("read_file", {"path": "/etc/passwd"}))

    assert statuses(result) == [("denied", "scope_not_granted")]


# --- the agent's reading ----------------------------------------------------------------------


def test_the_agent_does_not_send_nor_list_a_tool_past_the_until_bob_signed() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "first"}))  # the runtime pins bob's laptop
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES,
                               grant_options={"notification:send": {"until": T0_MS + 3600_000}}))
    frame = scene.server.relation_frame(EventType.RELATION_UPDATED)
    run(scene.agent.handle_frame(frame))
    tools = AgentToolList(scene.agent, RELATION_ID)
    tools.observe(frame)
    in_time = run(tools._scopes(1, scene.server.manifest))[0]
    scene.clock.now = T0 + 3600
    sent = len(scene.server.messages)

    with pytest.raises(ConsentUnverified):
        run(scene.agent.call_tool(RELATION_ID, "notify", {"title": "too late"}, timeout=0.3))

    assert len(scene.server.messages) == sent
    assert "notification:send" in in_time
    assert run(tools._scopes(1, scene.server.manifest))[0] == {"filesystem:read", "location:read"}


@pytest.mark.parametrize("option", ["until, passed", "once, used (withdrawal refused)"])
def test_a_grant_past_its_until_or_used_once_is_not_offered_for_withdrawal(option: str) -> None:
    scene = Scene()
    if option.startswith("until"):
        run(scene.client.reconsent(RELATION_ID, ALL_SCOPES,
                                   grant_options={"location:read": {"until": T0_MS + 30 * 86400_000}}))
    else:
        run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))
        scene.server.offline = True
        run(scene.call("locate", {}))  # used at T0: 90 days before the question below

    assert run(scene.client.unused_grants(now=T0 + 90 * DAY)) == []
    assert "location:read" in scene.server.granted


def test_a_refused_withdrawal_is_made_again_once_the_server_takes_it(tmp_path: Path) -> None:
    scene = Scene(state=tmp_path)
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))
    scene.server.offline = True
    run(scene.call("locate", {}))
    scene.server.offline = False
    scene.client = scene.start_client()  # a restart: the device remembers what it owes

    run(scene.client.retry_withdrawals())

    assert scene.server.granted == ["filesystem:read", "notification:send"]
    assert run(scene.client.reconsent(RELATION_ID, ALL_SCOPES))["granted_scopes"] == sorted(ALL_SCOPES)  # asked again


def test_a_relation_event_brings_the_withdrawal_the_server_refused() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES, grant_options=ONCE))
    scene.server.offline = True
    run(scene.call("locate", {}))
    scene.server.offline = False

    run(scene.client.handle_frame(scene.server.relation_frame(EventType.RELATION_UPDATED)))

    assert "location:read" not in scene.server.granted


# --- a refusal the user did not answer is told to them (issue 26.2) ------------------------


def test_a_call_of_a_paused_permission_is_refused_and_bob_is_told_why_but_not_of_his_own_no() -> None:
    """The server hides bob's pending re-consent from the agent's side; his device refuses
    the paused tool and tells him so — a refusal he said himself is not told back."""
    scene = Scene()
    notices = told(scene)
    scene.server.publish(widened_path(), pending=["filesystem:read"])
    scene.agent_side.lie(f"/h2a/relations/{RELATION_ID}", settle_relation)
    v2 = scene.runtime(widened_path())

    paused = run(scene.call("read_file", {"path": "/etc/passwd"}, agent=v2))
    scene.prompt.answer = False
    declined = run(scene.call("locate", {}, agent=v2))

    assert statuses(paused, declined) == [("denied", "reauth_required"), ("denied", "user_refused")]
    assert [(n.kind, n.reason, n.scope, n.text) for n in notices] == [
        ("call_refused", "reauth_required", "filesystem:read",
         f"Refused {AGENT_NAME}'s read_file: filesystem:read is paused until you answer the agent's new version.")]
