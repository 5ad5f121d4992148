"""The blind pipe: store a message, tell its recipient, keep it for offline delivery.

``message_send`` is the one way in: it owns the rules, the rate limit and idempotency.

``payload`` is opaque: measured for the size cap, stored and forwarded, nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from agents.auth import AgentPrincipal
from agents.models import Agent
from eventlog import ordering
from eventlog.models import Event
from eventlog.services import EVENT_LOG_LOCK, event_emit, ring_doorbell
from hashee.errors import HasheeError
from hashee_sdk.core.event_types import EventType
from relations.models import Relation
from relations.selectors import relation_with_agent
from toolcalls import idempotency, statements
from toolcalls.models import Message
from toolcalls.ratelimit import tool_call_take
from toolcalls.serializers import message_input

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


@dataclass(frozen=True)
class Sent:
    """The answer to a send: 201 with the message, or an idempotent replay of the first."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    replayed: bool = False


def message_send(*, principal: Any, relation_id: Any, data: Callable[[], Any],
                 idempotency_key: str | None) -> Sent:
    """Send a message from ``principal`` (an AgentPrincipal or a user) into relation
    ``relation_id``; ``data`` reads the message (the request's JSON body), once the
    relation is known, so that an unknown relation is 404 whatever the body. Raises, in
    this order: NOT_FOUND, the body's errors (VALIDATION_ERROR…), message_check's and
    RATE_LIMITED. With an Idempotency-Key, a request the key already answered is answered
    again (a replay), and another request under it is IDEMPOTENCY_KEY_REUSED, whatever
    message_check would say now (RATE_LIMITED aside: every request counts, as Stripe's)."""
    sender = sender_for(principal=principal, relation_id=relation_id)
    body = data()
    if not isinstance(body, dict):
        raise HasheeError("VALIDATION_ERROR", "The request body must be a JSON object.")
    fields = message_input(body)
    if idempotency_key is None:
        size, headers = _admit(sender, fields)
        return Sent(201, _output(_message_store(sender=sender, size=size, **fields)), headers)
    claim = idempotency.idempotency_claim(
        principal=_principal_key(sender), key=idempotency_key,
        fingerprint=idempotency.fingerprint(method="POST", body=body,
                                            path=reverse("messages", kwargs={"relation_id": relation_id})))
    try:
        size, headers = _admit(sender, fields)
    except HasheeError as error:
        if error.code != "RATE_LIMITED" and (replayed := _replay(claim)) is not None:
            return replayed
        raise

    def store_key(message: Message) -> None:
        idempotency.idempotency_store(claim=claim, status=201, body=_output(message), headers=headers)

    for _ in range(2):  # a second time only when the key had expired (deleted by _replay)
        try:
            with transaction.atomic():  # the key with its response, the message and its event
                message = _message_store(sender=sender, size=size, **fields, before_event=store_key)
            return Sent(201, _output(message), headers)
        except IntegrityError:  # the key is taken: this transaction stored nothing
            replayed = _replay(claim)
            if replayed is not None:
                return replayed
    raise HasheeError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is in progress.")


def _replay(claim: idempotency.Claim) -> Sent | None:
    found = idempotency.idempotency_stored(claim=claim)
    return None if found is None else Sent(found["status"], found["body"], found["headers"], replayed=True)


def sender_for(*, principal: Any, relation_id: Any) -> Sender:
    """The relation's agent or user behind these credentials; anyone else gets 404."""
    relation = relation_with_agent(relation_id=relation_id)
    if relation is not None:
        if isinstance(principal, AgentPrincipal) and relation.agent_id == principal.agent_id:
            return Sender("agent", relation)
        if not isinstance(principal, AgentPrincipal) and relation.user_id == principal.pk:
            return Sender("user", relation)
    raise HasheeError("NOT_FOUND", "No such relation.")


def _principal_key(sender: Sender) -> str:
    relation = sender.relation
    return f"agent:{relation.agent_id}" if sender.kind == "agent" else f"user:{relation.user_id}"


def _admit(sender: Sender, fields: dict[str, Any]) -> tuple[int, dict[str, str]]:
    """message_check's rules, then a tool call's rate limit (counted here); the payload's
    size and the rate-limit headers of the answer."""
    size = message_check(sender=sender, msg_subtype=fields["msg_subtype"], payload=fields["payload"])
    headers: dict[str, str] = {}
    if fields["msg_subtype"] == Message.Subtype.ARTIFACT_TOOL_CALL:
        usage = tool_call_take(agent_id=sender.relation.agent_id)
        headers = usage.headers()
        if usage.limited:
            raise HasheeError("RATE_LIMITED", f"At most {usage.limit} tool calls per minute per agent.",
                              headers={**headers, "Retry-After": str(usage.retry_after())})
    return size, headers


def _output(message: Message) -> dict[str, Any]:
    """``MessageOutput`` of a message just sent (the same fields, formatted as DRF does)."""
    sent = message_payload(message)
    return {"message_id": sent["message_id"], "relation_id": str(message.relation_id), "sender": sent["sender"],
            "msg_subtype": sent["msg_subtype"], "content_type": sent["content_type"],
            "created_at": sent["created_at"]}


def _message_store(*, sender: Sender, msg_subtype: str, content_type: str, payload: Any, size: int,
                   client_msg_id: str = "", before_event: Callable[[Message], None] | None = None) -> Message:
    """Store the message and its ``message.new`` event atomically, calling ``before_event``
    with the message as stored (id and time final) before the event is written, in the same
    transaction. On PostgreSQL, when the event is the user's (no webhook to queue), message
    and event go in ONE statement that also takes the event log's lock in share mode (writers
    do not wait for each other; readers stop at the completed-up-to position, eventlog.watermark):
    autocommitted (the relay's hot path), or in the caller's transaction after
    ``before_event``'s writes; otherwise in the usual transaction."""
    relation = sender.relation
    message = Message(relation_id=relation.pk, sender=sender.kind, msg_subtype=msg_subtype,
                      content_type=content_type, payload=payload, payload_bytes=size, client_msg_id=client_msg_id,
                      created_at=timezone.now())
    to_agent = sender.kind == "user"
    wrapper = transaction.get_connection()
    if to_agent or connection.vendor != "postgresql" or (wrapper.in_atomic_block and before_event is None):
        with transaction.atomic(savepoint=False):
            message.save(force_insert=True)  # sets created_at anew (auto_now_add): the event says what is stored
            if before_event is not None:
                before_event(message)
            event_emit(type=EventType.MESSAGE_NEW, data=_event_data(message), agent=relation.agent if to_agent else None,
                       user_id=None if to_agent else relation.user_id)
        return message
    if before_event is not None:
        before_event(message)  # the statement below stores exactly this id and time
    event = Event(type=EventType.MESSAGE_NEW, data=_event_data(message), user_id=relation.user_id,
                  created_at=timezone.now())
    statements.message_with_event_insert(message=message, event=event, log_lock=EVENT_LOG_LOCK)
    if wrapper.in_atomic_block:
        ordering.event_written(wrapper)  # nothing more may be written in this transaction
    transaction.on_commit(lambda: ring_doorbell(event))  # at once when autocommitted
    return message


def _event_data(message: Message) -> dict[str, Any]:
    return {"relation_id": str(message.relation_id), "message": message_payload(message)}


def messages_purge(*, older_than_days: int | None = None) -> int:
    """Delete messages older than the retention period (HASHEE_MESSAGE_RETENTION_DAYS), in
    one statement; returns how many."""
    days = older_than_days if older_than_days is not None else settings.HASHEE_MESSAGE_RETENTION_DAYS
    deleted, _ = Message.objects.filter(created_at__lt=timezone.now() - timedelta(days=days)).delete()
    return deleted
