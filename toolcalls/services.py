"""The blind pipe: store a message, tell its recipient, keep it for offline delivery.

``payload`` is opaque: measured for the size cap, stored and forwarded, nothing else.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from agents.auth import KeyMatch
from agents.models import Agent
from eventlog.services import Guard, row_and_event_create
from hashee import rows
from hashee.errors import HasheeError
from relations.models import Relation
from toolcalls.models import Message

MAX_PAYLOAD_BYTES = 262144
AGENT_ONLY = {Message.Subtype.ARTIFACT_TOOL_CALL}
USER_ONLY = {Message.Subtype.ARTIFACT_RESPONSE}


@dataclass(frozen=True)
class Sender:
    kind: str  # "agent" | "user"
    relation: Relation


def payload_size(payload: Any) -> int:
    """Bytes of the compact JSON serialization (the SPEC's size measure)."""
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())


def message_check(*, sender: Sender, msg_subtype: str, payload: Any) -> int:
    """Role, state and size rules; returns the payload size. Raises FORBIDDEN,
    RELATION_REVOKED, AGENT_PAUSED, MESSAGE_TOO_LARGE."""
    relation = sender.relation
    if msg_subtype in AGENT_ONLY and sender.kind != "agent":
        raise HasheeError("FORBIDDEN", f"Only the relation's agent may send {msg_subtype}.")
    if msg_subtype in USER_ONLY and sender.kind != "user":
        raise HasheeError("FORBIDDEN", f"Only the relation's user may send {msg_subtype}.")
    if relation.revoked_at is not None:
        raise HasheeError("RELATION_REVOKED", "This relation has been revoked.")
    if relation.agent.status == Agent.Status.PAUSED:
        raise HasheeError("AGENT_PAUSED", "This agent is paused by an operator.")
    size = payload_size(payload)
    if size > MAX_PAYLOAD_BYTES:
        raise HasheeError("MESSAGE_TOO_LARGE", f"The payload is {size} bytes; at most {MAX_PAYLOAD_BYTES}.")
    return size


def message_payload(message: Message) -> dict[str, Any]:
    return {"message_id": str(message.id), "sender": message.sender, "msg_subtype": message.msg_subtype,
            "content_type": message.content_type, "payload": message.payload,
            "created_at": message.created_at.isoformat().replace("+00:00", "Z")}


def message_send(*, sender: Sender, msg_subtype: str, content_type: str, payload: Any, size: int,
                 client_msg_id: str = "") -> Message:
    """Store the message and its ``message.new`` event atomically (row_and_event_create)."""
    relation = sender.relation
    message, data = _new_message(relation.pk, sender.kind, msg_subtype=msg_subtype, content_type=content_type,
                                 payload=payload, size=size, client_msg_id=client_msg_id)
    if sender.kind == "agent":
        row_and_event_create(message, type="message.new", data=data, user_id=relation.user_id)
    else:
        row_and_event_create(message, type="message.new", data=data, agent=relation.agent)
    return message


def message_send_from_agent(*, relation_id: Any, msg_subtype: str, content_type: str, payload: Any, size: int,
                            client_msg_id: str = "", agent_id: Any = None,
                            key: KeyMatch | None = None) -> Message | None:
    """The relay's hot path: an agent's message to the user of relation ``relation_id``,
    stored with its event by one statement that also checks what ``message_check`` checks
    of the relation (it is this agent's, not revoked, the agent not paused), on PostgreSQL
    outside a transaction. The agent is ``agent_id`` once authenticated, or that of the
    agent key ``key`` before: the statement then checks the key as authentication would and
    records its use. None, with nothing stored, when a check fails: authentication and
    ``message_check`` then say why. The role and size rules are the caller's."""
    message, data = _new_message(relation_id, "agent", msg_subtype=msg_subtype, content_type=content_type,
                                 payload=payload, size=size, client_msg_id=client_msg_id)
    relation, paused = rows.db_value(Relation, "id", relation_id), str(Agent.Status.PAUSED)
    if key is None:
        guard = Guard(_live_relation_sql(by_key=False), [relation, rows.db_value(Agent, "id", agent_id), paused])
    else:
        touch, touch_params = key.touch("guard")
        guard = Guard(_live_relation_sql(by_key=True).format(key=key.select), [*key.params, relation, paused],
                      then=touch, then_params=touch_params)
    event = row_and_event_create(message, type="message.new", data=data, guard=guard)
    return message if event is not None else None


def _new_message(relation_id: Any, sender: str, *, msg_subtype: str, content_type: str, payload: Any, size: int,
                 client_msg_id: str) -> tuple[Message, Callable[[], dict[str, Any]]]:
    """An unsaved message and the builder of its ``message.new`` event data."""
    message = Message(relation_id=relation_id, sender=sender, msg_subtype=msg_subtype, content_type=content_type,
                      payload=payload, payload_bytes=size, client_msg_id=client_msg_id, created_at=timezone.now())

    def data() -> dict[str, Any]:
        return {"relation_id": str(relation_id), "message": message_payload(message)}

    return message, data


@functools.cache
def _live_relation_sql(*, by_key: bool) -> str:
    """The user of a relation that message_check lets the agent write to (SQL for a Guard):
    the agent given by its id, or (``by_key``) that of an agent key, ``{key}`` being its
    KeyMatch.select, whose id it returns too."""
    relation, agent = rows.Columns(Relation, "r", ("user",)), rows.Columns(Agent, "a", ("id",))
    key_id, key_join, by_id = ((", key.key_id", " JOIN ({key}) key ON key.agent_id = r.agent_id", "") if by_key
                               else ("", "", " AND r.agent_id = %s"))
    return (f"SELECT {relation.sql()} AS user_id{key_id} FROM {relation.table()} "  # noqa: S608 - model metadata
            f"JOIN {agent.table()} ON a.id = r.agent_id{key_join} "
            f"WHERE r.id = %s{by_id} AND r.revoked_at IS NULL AND a.status <> %s")


def messages_purge(*, older_than_days: int | None = None) -> int:
    """Delete messages older than the retention period (HASHEE_MESSAGE_RETENTION_DAYS), in
    one statement; returns how many."""
    days = older_than_days if older_than_days is not None else settings.HASHEE_MESSAGE_RETENTION_DAYS
    deleted, _ = Message.objects.filter(created_at__lt=timezone.now() - timedelta(days=days)).delete()
    return deleted
