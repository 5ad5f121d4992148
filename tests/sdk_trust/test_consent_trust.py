"""Issue 23 holes 1, 4 and 5, and SPEC §9.6, against a lying server: what the user consented
to holds against the server's answers. Every attack ends with the tool never run and a
stable reason the user sees (an audit entry, or a denial the agent gets)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import ConsentUnverified, KeyPair
from hashee_sdk.agent_tools import AgentToolList
from hashee_sdk.consent_statements import sign_consent
from hashee_sdk.core import signing
from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.core.event_types import EventType
from hashee_sdk.errors import ManifestUnverified
from tests.sdk.fakes import AGENT_ID, ALL_SCOPES, MANIFEST_HASH, RELATION_ID, USER, manifest
from tests.sdk.test_client import T0_MS
from tests.sdk_trust.lying import settle_relation
from tests.sdk_trust.scene import Scene, run
from tests.sdk_trust.test_lying_server import PASSWD, statuses, widened_path

ALICE = signing.derive_private_jwk(b"alice's identity", info=b"hashee consent tests")
EARLIER = signing.derive_private_jwk(b"alice's earlier identity", info=b"hashee consent tests")
Rewrite = Callable[[Any], Any]


def relation_says(**fields: Any) -> Rewrite:
    """``GET /h2a/relations/{id}`` states these fields (``...``: drops the field)."""
    def rewrite(body: Any) -> Any:
        for name, value in fields.items():
            if value is ...:
                body.pop(name, None)
            else:
                body[name] = value
        return body
    return rewrite


def signed_by(scene: Scene) -> None:
    """bob consents on his laptop to every scope of the current version (a signed statement)."""
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES))


def notify_levels(*levels: str) -> list[dict[str, Any]]:
    """Versions of the manifest whose notification:send has these sensitivities, in turn."""
    versions = []
    for index, level in enumerate(levels):
        version = manifest()
        version["agent_version"] = f"1.0.{index}"
        version["permission_scopes"][1]["sensitivity"] = level
        versions.append(version)
    return versions


# --- hole 1: an acknowledged version 0 (or any other shape of "none") ----------------------


ACK_LIES: dict[str, Callable[[Scene], Rewrite]] = {
    "dropped": lambda scene: relation_says(acknowledged_manifest_version=..., acknowledged_manifest_hash=...),
    "0": lambda scene: relation_says(acknowledged_manifest_version=0, acknowledged_manifest_hash=None),
    "null": lambda scene: relation_says(acknowledged_manifest_version=None, acknowledged_manifest_hash=None),
    "empty": lambda scene: relation_says(acknowledged_manifest_version="", acknowledged_manifest_hash=""),
    "not an int": lambda scene: relation_says(acknowledged_manifest_version=2.0),
    "older": lambda scene: relation_says(acknowledged_manifest_version=1,
                                         acknowledged_manifest_hash=canonical_hash(scene.server.versions[0])),
    "another agent's": lambda scene: relation_says(acknowledged_manifest_hash=MANIFEST_HASH),
}


@pytest.mark.parametrize("lie", list(ACK_LIES))
def test_a_scope_consented_at_medium_never_runs_silently_whatever_the_acknowledgement_says(lie: str) -> None:
    # v1 low, v2 medium (bob consented again, signed), v3 back to low: lowering is not breaking,
    # so only the level bob consented at (medium) keeps notify from running unasked.
    scene = Scene()
    low, medium, lowered = notify_levels("low", "medium", "low")
    scene.server.versions = [low]
    scene.server.publish(medium, pending=["notification:send"])
    signed_by(scene)
    run(scene.client.relation(RELATION_ID))  # the device pins bob's acknowledgement of v2
    scene.server.publish(lowered)
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", ACK_LIES[lie](scene))
    scene.client._invalidate(RELATION_ID)

    result = run(scene.call("notify", {"title": "silently"}, agent=scene.runtime(lowered)))

    assert statuses(result) == [("denied", "manifest_unverified")]
    assert scene.handlers.calls == [] and scene.prompt.asked == []
    assert scene.refusals() == ["manifest_unverified"]


def test_an_acknowledged_version_0_never_lets_a_widened_read_file_run_with_a_list_of_paths() -> None:
    scene = Scene()
    signed_by(scene)
    run(scene.call("read_file", {"path": "notes.txt"}))  # an open medium window
    scene.server.publish(widened_path(), pending=["filesystem:read"])
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", settle_relation)
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", relation_says(acknowledged_manifest_version=0))
    scene.client._invalidate(RELATION_ID)  # the re-consent event was dropped: only this refetch

    result = run(scene.call("read_file", {"path": PASSWD}, agent=scene.runtime(widened_path())))

    assert statuses(result) == [("denied", "manifest_unverified")]
    assert scene.handlers.calls == [("read_file", {"path": "notes.txt"})]


@pytest.mark.parametrize("version", [0, None])
def test_the_agents_tool_list_refuses_a_relation_that_states_no_acknowledged_version(version: Any) -> None:
    scene = Scene()
    scene.server.publish(widened_path(), pending=["filesystem:read"])
    tools = AgentToolList(scene.runtime(widened_path()), RELATION_ID)
    event = settle_relation(scene.server.relation_frame(EventType.RELATION_UPDATED)["data"]["relation"])
    tools.observe({"type": EventType.RELATION_UPDATED,
                   "data": {"relation": {**event, "acknowledged_manifest_version": version}}})

    with pytest.raises(ManifestUnverified):
        run(tools._scopes(2, widened_path()))


# --- hole 4: withdrawn consent and revoked relations restored ------------------------------


def test_a_scope_bob_withdrew_and_the_server_lists_again_is_asked_on_the_device() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "granted"}))  # low: silent, and confirmed on the device
    scene.server.granted = ["filesystem:read", "location:read"]  # bob withdrew it on the web
    run(scene.client.relation(RELATION_ID, refresh=True))
    scene.server.granted = list(ALL_SCOPES)  # the database lists it again
    scene.client._invalidate(RELATION_ID)
    scene.prompt.answer = False

    result = run(scene.call("notify", {"title": "restored"}))

    assert statuses(result) == [("denied", "user_refused")]
    assert scene.handlers.calls == [("notify", {"title": "granted"})]
    assert [(p.tool_name, p.newly_granted) for p in scene.prompt.asked] == [("notify", True)]


def test_a_relation_seen_revoked_stays_revoked_when_the_database_says_it_is_live_again(tmp_path: Path) -> None:
    scene = Scene(state=tmp_path)
    scene.server.status = "revoked"
    assert statuses(run(scene.call("notify", {"title": "a"}))) == [("denied", "permission_revoked")]
    scene.server.status = "active"  # revoked_at set back to NULL
    scene.client = scene.start_client()  # and the device restarted meanwhile

    result = run(scene.call("notify", {"title": "b"}))

    assert statuses(result) == [("denied", "consent_unverified")]
    assert scene.handlers.calls == [] and scene.refusals()[-1] == "consent_unverified"


def test_a_scope_bob_withdrew_with_a_signature_never_runs_when_the_server_grants_it_again() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ["filesystem:read", "location:read"]))
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", relation_says(granted_scopes=ALL_SCOPES,
                                                                       consent_statement=None))

    result = run(scene.call("notify", {"title": "restored"}))
    other = run(scene.call("read_file", {"path": "notes.txt"}))

    assert statuses(result, other) == [("denied", "consent_unverified"), ("ok", None)]
    assert [p.tool_name for p in scene.prompt.asked] == ["read_file"]


def test_a_relation_bob_revoked_with_a_signature_never_runs_again() -> None:
    scene = Scene()
    revoked = run(scene.client.revoke(RELATION_ID))
    assert revoked["status"] == "revoked" and revoked["consent_statement"]["statement"]["revoked"] is True
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", relation_says(status="active", consent_statement=None))

    result = run(scene.call("notify", {"title": "after the revocation"}))

    assert statuses(result) == [("denied", "consent_unverified")] and scene.handlers.calls == []


# --- hole 5: earlier versions of an identified agent ----------------------------------------


@pytest.mark.parametrize("v1_signature", ["none", "an earlier key"])
def test_a_version_not_signed_by_the_identity_is_never_taken_as_what_bob_acknowledged(v1_signature: str) -> None:
    # The device's first look comes after a breaking change. The server serves "version 1"
    # with the widened content (its hash recomputed), unsigned or signed by another key, and
    # hides the pending re-consent: nothing would look breaking.
    scene = Scene()
    scene.server.give_identity(ALICE)
    scene.server.publish(widened_path(), pending=["filesystem:read"])

    def consented_to_what_is_current(body: Any) -> Any:
        body["manifest"] = widened_path()
        body["hash"] = canonical_hash(body["manifest"])
        body["capability_manifest_signature"] = (signing.sign_manifest(body["manifest"], EARLIER)
                                                 if v1_signature == "an earlier key" else None)
        return body

    scene.user_side.lie("/manifest/versions/1", consented_to_what_is_current)
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", settle_relation)
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}",
                        relation_says(acknowledged_manifest_hash=canonical_hash(widened_path())))

    result = run(scene.call("read_file", {"path": PASSWD}, agent=scene.runtime(widened_path())))

    assert statuses(result) == [("denied", "manifest_unverified")]
    assert scene.handlers.calls == [] and scene.prompt.asked == []


def test_a_version_the_device_verified_before_a_rotation_is_still_believed() -> None:
    scene = Scene()
    scene.server.give_identity(ALICE)
    scene.server.publish(notify_levels("low")[0])
    run(scene.client.reconsent(RELATION_ID, ALL_SCOPES))
    run(scene.client.relation(RELATION_ID))  # v2, signed by ALICE, pinned as acknowledged
    scene.server.publish(notify_levels("low", "low")[1])  # not breaking: v2 stays acknowledged
    scene.server.signatures[2] = signing.sign_manifest(scene.server.versions[1], EARLIER)  # as if rotated since
    scene.client._invalidate(RELATION_ID)

    result = run(scene.call("notify", {"title": "hi"}, agent=scene.runtime(scene.server.manifest)))

    assert statuses(result) == [("ok", None)]


# --- SPEC §9.6: consent signed on the device -------------------------------------------------


def test_bob_grants_with_a_signed_statement_and_the_call_runs() -> None:
    scene = Scene()

    relation = run(scene.client.grant(AGENT_ID, ["notification:send"]))
    result = run(scene.call("notify", {"title": "hi"}))

    statement = relation["consent_statement"]["statement"]
    assert (statement["user_id"], statement["granted_scopes"], statement["device_key_id"]) == (
        USER, ["notification:send"], scene.device.key_id)
    assert statement["acknowledged_manifest_hash"] == MANIFEST_HASH and statement["seq"] >= T0_MS
    assert statuses(result) == [("ok", None)]


def test_each_statement_of_bob_has_a_higher_seq() -> None:
    scene = Scene()
    first = run(scene.client.reconsent(RELATION_ID, ALL_SCOPES))["consent_statement"]["statement"]["seq"]
    second = run(scene.client.reconsent(RELATION_ID, ["filesystem:read"]))["consent_statement"]["statement"]["seq"]

    assert second > first


def test_a_statement_signed_by_a_device_bob_does_not_trust_is_ignored_and_reported() -> None:
    scene = Scene()
    run(scene.client.reconsent(RELATION_ID, ["filesystem:read"]))
    mallory = KeyPair.generate()
    forged = sign_consent(mallory, agent_id=AGENT_ID, user_id=USER, granted_scopes=ALL_SCOPES,
                          acknowledged_manifest_version=1, acknowledged_manifest_hash=MANIFEST_HASH,
                          seq=2**52, ts=T0_MS)
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", relation_says(granted_scopes=ALL_SCOPES,
                                                                       consent_statement=forged))
    scene.client._invalidate(RELATION_ID)

    result = run(scene.call("notify", {"title": "forged"}))

    assert statuses(result) == [("denied", "consent_unverified")] and scene.handlers.calls == []
    assert scene.refusals() == ["consent_unverified", "consent_unverified"]  # the statement, then the call


@pytest.mark.parametrize("shape", ["older statement", "malformed statement", "another agent's statement"])
def test_an_older_or_malformed_statement_never_restores_a_grant(shape: str) -> None:
    scene = Scene()
    older = run(scene.client.reconsent(RELATION_ID, ALL_SCOPES))["consent_statement"]
    run(scene.client.reconsent(RELATION_ID, ["filesystem:read"]))
    served = copy.deepcopy(older)
    if shape == "malformed statement":
        served["statement"]["granted_scopes"] = ["notification:send", "filesystem:read"]  # not sorted
    elif shape == "another agent's statement":
        served = sign_consent(scene.device, agent_id="another-agent", user_id=USER, granted_scopes=ALL_SCOPES,
                              acknowledged_manifest_version=1, acknowledged_manifest_hash=MANIFEST_HASH,
                              seq=2**52, ts=T0_MS)
    scene.user_side.lie(f"/h2a/relations/{RELATION_ID}", relation_says(granted_scopes=ALL_SCOPES,
                                                                       consent_statement=served))
    scene.client._invalidate(RELATION_ID)

    result = run(scene.call("notify", {"title": "restored"}))

    assert statuses(result) == [("denied", "consent_unverified")] and scene.handlers.calls == []


def test_a_reconsent_not_signed_after_a_signed_one_is_not_believed_for_the_changed_tool() -> None:
    scene = Scene()
    signed_by(scene)
    scene.server.publish(widened_path(), pending=["filesystem:read"])
    scene.server.pending, scene.server.status, scene.server.acknowledged = [], "active", 2  # on the web, unsigned
    scene.server.consent_statement = None
    scene.client._invalidate(RELATION_ID)
    v2 = scene.runtime(widened_path())

    result = run(scene.call("read_file", {"path": PASSWD}, agent=v2))
    other = run(scene.call("notify", {"title": "still works"}, agent=v2))

    assert statuses(result, other) == [("denied", "consent_unverified"), ("ok", None)]
    assert scene.handlers.calls == [("notify", {"title": "still works"})]


def test_a_statement_that_arrives_in_an_event_holds_though_the_server_drops_it_later() -> None:
    scene = Scene()
    laptop_consent = sign_consent(scene.device, agent_id=AGENT_ID, user_id=USER, granted_scopes=["filesystem:read"],
                                  acknowledged_manifest_version=1, acknowledged_manifest_hash=MANIFEST_HASH,
                                  seq=T0_MS, ts=T0_MS)
    scene.server.consent_statement = laptop_consent
    run(scene.client.handle_frame(scene.server.relation_frame(EventType.RELATION_UPDATED)))
    scene.server.consent_statement = None

    result = run(scene.call("notify", {"title": "unsigned"}))

    assert statuses(result) == [("denied", "consent_unverified")]


def test_the_agent_refuses_locally_a_tool_the_newest_statement_does_not_give() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "first"}))  # the runtime pins bob's laptop
    run(scene.client.reconsent(RELATION_ID, ["filesystem:read"]))
    run(scene.agent.handle_frame(scene.server.relation_frame(EventType.RELATION_UPDATED)))
    scene.server.granted = list(ALL_SCOPES)  # the server says notify is granted again
    sent = len(scene.server.messages)

    with pytest.raises(ConsentUnverified):
        run(scene.agent.call_tool(RELATION_ID, "notify", {"title": "second"}, timeout=0.3))

    assert len(scene.server.messages) == sent
    assert run(scene.agent.check_consent(RELATION_ID, "filesystem:read", 1)) is None


def test_the_agent_refuses_a_tool_changed_since_the_version_bob_signed_for() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "first"}))
    signed_by(scene)
    run(scene.agent.handle_frame(scene.server.relation_frame(EventType.RELATION_UPDATED)))
    scene.server.publish(widened_path(), pending=["filesystem:read"])
    v2 = scene.runtime(widened_path())
    v2.store = scene.agent.store
    v2.consents = scene.agent.consents

    with pytest.raises(ConsentUnverified):
        run(v2.call_tool(RELATION_ID, "read_file", {"path": PASSWD}, timeout=0.3))
    assert run(v2.check_consent(RELATION_ID, "notification:send", 2)) is None


def test_a_statement_not_signed_by_a_trusted_device_is_not_believed_by_the_agent() -> None:
    scene = Scene()
    run(scene.call("notify", {"title": "first"}))
    mallory = KeyPair.generate()
    frame = scene.server.relation_frame(EventType.RELATION_UPDATED)
    frame["data"]["relation"]["consent_statement"] = sign_consent(
        mallory, agent_id=AGENT_ID, user_id=USER, granted_scopes=[], acknowledged_manifest_version=1,
        acknowledged_manifest_hash=MANIFEST_HASH, seq=T0_MS, ts=T0_MS, revoked=True)

    run(scene.agent.handle_frame(frame))

    assert scene.agent.consents.newest(RELATION_ID) is None
