"""Every hand-written SQL statement of the hot paths, as Zulip confines its raw SQL: literal
statements behind typed functions. The callers own the rules; nothing here decides
anything but how to read or write the rows, and no SQL leaves this module.

Why hand-written: Django compiles a queryset to SQL on every evaluation, ~0.4 ms of
Python for a two-table lookup, more than the round trip to PostgreSQL. Every
authenticated request looks its credential up, and every relayed message its relation,
so those lookups are written out here; the relay stores a message with its event in one
autocommitted statement (no BEGIN/COMMIT round trips between drawing the event's id and
committing it, which the log's readers wait out).

It lives in ``toolcalls`` because the relay is what pays for it: ``bench/relay.py``
measures each statement (the key lookup, the relation lookup, the insert).

Rows are read into model instances the ORM's way: the columns are listed in each model's
field order and go through the converters the ORM applies (UUIDs, JSON, datetimes and
booleans on SQLite), so the instances are indistinguishable from a queryset's, with only
the listed fields loaded (the others load on access, as with ``.only()``).
``tests/toolcalls/test_statements.py`` checks the literal column lists against the models.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Expression, Field, Model
from django.db.models.sql import Query

from agents.models import Agent, ApiKey
from agents.token_models import AccessToken
from eventlog.models import Event
from relations.models import Relation
from toolcalls.models import IdempotencyKey, Message

# (model, its fields in the model's order, as the SELECT lists their columns)
Part = tuple[type[Model], tuple[str, ...]]

USER: Part = (User, ("id", "password", "last_login", "is_superuser", "username", "first_name", "last_name",
                     "email", "is_staff", "is_active", "date_joined"))
API_KEY: Part = (ApiKey, ("id", "kind", "user", "agent", "name", "prefix", "key_hash", "created_at",
                          "last_used_at", "revoked_at"))
ACCESS_TOKEN: Part = (AccessToken, ("id", "key", "prefix", "token_hash", "scopes", "created_at", "expires_at"))
RELATION: Part = (Relation, ("id", "user", "agent", "granted_scopes", "grant_options", "acknowledged_manifest_version",
                             "acknowledged_manifest_hash", "acknowledged_identity_resets", "consent_statement",
                             "consent_seq", "events_from_id", "events_until_id", "created_at", "updated_at",
                             "revoked_at"))
# The agent fields a message needs: its state, and where its webhooks go.
MESSAGING_AGENT: Part = (Agent, ("id", "owner", "name", "status", "webhook_url"))
# What deciding and finding the tool list needs of the agent: not its manifest.
TOOLS_AGENT: Part = (Agent, ("id", "status", "capability_manifest_version", "capability_manifest_hash",
                             "scope_index"))

_API_KEYS_BY_PREFIX = """
    SELECT k.id, k.kind, k.user_id, k.agent_id, k.name, k.prefix, k.key_hash, k.created_at, k.last_used_at,
           k.revoked_at,
           u.id, u.password, u.last_login, u.is_superuser, u.username, u.first_name, u.last_name, u.email,
           u.is_staff, u.is_active, u.date_joined
    FROM agents_apikey k JOIN auth_user u ON u.id = k.user_id
    WHERE k.prefix = %s AND k.kind = %s AND k.revoked_at IS NULL AND u.is_active"""

_ACCESS_TOKENS_BY_PREFIX = """
    SELECT t.id, t.key_id, t.prefix, t.token_hash, t.scopes, t.created_at, t.expires_at,
           k.id, k.kind, k.user_id, k.agent_id, k.name, k.prefix, k.key_hash, k.created_at, k.last_used_at,
           k.revoked_at
    FROM hashee_accesstoken t JOIN agents_apikey k ON k.id = t.key_id JOIN auth_user u ON u.id = k.user_id
    WHERE t.prefix = %s AND t.expires_at > %s AND k.kind = 'agent' AND k.agent_id IS NOT NULL
      AND k.revoked_at IS NULL AND u.is_active"""

_RELATION_COLUMNS = """
    r.id, r.user_id, r.agent_id, r.granted_scopes, r.grant_options, r.acknowledged_manifest_version,
    r.acknowledged_manifest_hash,
    r.acknowledged_identity_resets, r.consent_statement, r.consent_seq, r.events_from_id, r.events_until_id,
    r.created_at, r.updated_at, r.revoked_at"""

_RELATION_WITH_AGENT = {
    MESSAGING_AGENT: f"""
    SELECT {_RELATION_COLUMNS}, a.id, a.owner_id, a.name, a.status, a.webhook_url
    FROM relations_relation r JOIN agents_agent a ON a.id = r.agent_id WHERE r.id = %s""",  # noqa: S608 - literal
    TOOLS_AGENT: f"""
    SELECT {_RELATION_COLUMNS}, a.id, a.status, a.capability_manifest_version, a.capability_manifest_hash,
           a.scope_index
    FROM relations_relation r JOIN agents_agent a ON a.id = r.agent_id WHERE r.id = %s""",  # noqa: S608 - literal
}

# The event log's lock (eventlog.statements) is taken in share mode by the statement itself,
# before the event's id is drawn, and held while the server executes and commits it (the
# statement is its own transaction): writers do not wait for each other; readers that settle
# the log wait for the holders (eventlog.watermark).
_MESSAGE_WITH_EVENT_INSERT = """
    WITH log_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%s)),
    new_message AS (
        INSERT INTO toolcalls_message (id, relation_id, sender, msg_subtype, content_type, payload, payload_bytes,
                                       client_msg_id, created_at)
        SELECT %s::uuid, %s::uuid, %s, %s, %s, %s::jsonb, %s, %s, %s::timestamptz FROM log_lock RETURNING seq),
    new_event AS (
        INSERT INTO hashee_event (type, data, user_id, agent_id, audience_id, created_at)
        SELECT %s, %s::jsonb, %s, NULL, NULL, %s::timestamptz FROM log_lock, new_message RETURNING id)
    SELECT (SELECT seq FROM new_message), (SELECT id FROM new_event)"""


def api_keys_by_prefix(*, prefix: str, kind: str) -> list[ApiKey]:
    """The live keys (not revoked, their user active) of this lookup prefix and kind, each
    with its user loaded."""
    keys = []
    for key, user in _read(_API_KEYS_BY_PREFIX, [prefix, kind], API_KEY, USER):
        key.user = user
        keys.append(key)
    return keys


def access_tokens_by_prefix(*, prefix: str, now: datetime) -> list[AccessToken]:
    """The tokens of this lookup prefix not expired at ``now`` whose agent key is live (not
    revoked, its user active), each with its key loaded."""
    tokens = []
    for token, key in _read(_ACCESS_TOKENS_BY_PREFIX, [prefix, _db(AccessToken, "expires_at", now)],
                            ACCESS_TOKEN, API_KEY):
        token.key = key
        tokens.append(token)
    return tokens


def relation_with_agent(*, relation_id: Any, agent: Part = MESSAGING_AGENT) -> Relation | None:
    """The relation with its agent loaded with the fields of ``agent`` (MESSAGING_AGENT or
    TOOLS_AGENT), or None."""
    found = _read(_RELATION_WITH_AGENT[agent], [_db(Relation, "id", relation_id)], RELATION, agent)
    if not found:
        return None
    relation, loaded = found[0]
    relation.agent = loaded
    return relation


def message_with_event_insert(*, message: Message, event: Event, log_lock: int) -> None:
    """Store an unsaved message and its unsaved event (addressed to a user, no webhook) in
    one autocommitted statement that takes the event log's lock ``log_lock`` in share mode
    (as every event writer does); both get their ids. PostgreSQL only, outside a transaction."""
    values = [_db(Message, name, getattr(message, name)) for name in
              ("id", "relation_id", "sender", "msg_subtype", "content_type", "payload", "payload_bytes",
               "client_msg_id", "created_at")]
    event_values = [event.type, _db(Event, "data", event.data), event.user_id, _db(Event, "created_at",
                                                                                   event.created_at)]
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGE_WITH_EVENT_INSERT, [log_lock, *values, *event_values])
        message.seq, event.id = cursor.fetchone()
    for instance in (message, event):
        instance._state.adding = False
        instance._state.db = connection.alias


def _db(model: type[Model], name: str, value: Any) -> Any:
    """``value`` as a parameter for ``model.name`` on this database (a UUID is hex on SQLite)."""
    return _field(model, name).get_db_prep_save(value, connection)


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    """``model.name``: the statements name concrete fields (get_field may also answer a reverse relation)."""
    return cast("Field[Any, Any]", model._meta.get_field(name))


_converters: dict[tuple[str, tuple[Part, ...]], tuple[Any, Any, list[list[str]]]] = {}


def _read(sql: str, params: Sequence[Any], *parts: Part) -> list[tuple[Any, ...]]:
    """Run ``sql`` (selecting each part's fields in order) and return one tuple of
    instances per row."""
    compiler, converters, attnames = _compiler_and_converters(parts)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows: Any = cursor.fetchall()
    if converters:
        rows = compiler.apply_converters(rows, converters)
    result = []
    for row in rows:
        start, instances = 0, []
        for (model, fields), names in zip(parts, attnames, strict=True):
            end = start + len(fields)
            instances.append(model.from_db(connection.alias, names, tuple(row[start:end])))
            start = end
        result.append(tuple(instances))
    return result


def _compiler_and_converters(parts: tuple[Part, ...]) -> tuple[Any, Any, list[list[str]]]:
    """What reading ``parts`` needs on this database, worked out once."""
    key = (connection.vendor, parts)
    found = _converters.get(key)
    if found is None:
        compiler = connection.ops.compiler("SQLCompiler")(Query(parts[0][0]), connection, connection.alias)
        columns: list[Expression] = [_field(model, name).get_col(f"t{i}") for i, (model, fields) in enumerate(parts)
                   for name in fields]
        attnames = [[_field(model, name).attname for name in fields] for model, fields in parts]
        found = _converters[key] = (compiler, compiler.get_converters(columns), attnames)
    return found


# An Idempotency-Key and its response, if no other transaction holds the key's lock, which
# this statement then takes until its transaction ends: a transaction that holds it has
# inserted the key and not yet committed, so a duplicate learns at once that its first is
# still running (409) instead of waiting on the unique index. Once the first has committed,
# the lock is free and the INSERT meets its row: IntegrityError, and its response replays.
_IDEMPOTENCY_KEY_INSERT = """
    WITH claim AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(%s) AS taken)
    INSERT INTO toolcalls_idempotencykey (principal, key, fingerprint, state, response_status, response_body,
                                          response_headers, created_at, user_id)
    SELECT %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::timestamptz, NULL FROM claim WHERE taken RETURNING id"""


def idempotency_key_insert(*, key: IdempotencyKey, lock: int) -> bool:
    """INSERT the unsaved ``key`` unless another transaction holds ``lock``: True when
    inserted (``lock`` is then held until this transaction ends), False when it is held.
    IntegrityError when a committed row has the key. PostgreSQL only, in a transaction."""
    values = [_db(IdempotencyKey, name, getattr(key, name)) for name in
              ("principal", "key", "fingerprint", "state", "response_status", "response_body", "response_headers",
               "created_at")]
    with connection.cursor() as cursor:
        cursor.execute(_IDEMPOTENCY_KEY_INSERT, [lock, *values])
        row = cursor.fetchone()
    if row is None:
        return False
    key.pk = row[0]
    key._state.adding = False
    key._state.db = connection.alias
    return True
