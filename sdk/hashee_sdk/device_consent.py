"""What the user consents to, signed on this device (SPEC §9.6) — grants, re-consents,
withdrawals and revocations — and the care of grant options the device alone can take
(SPEC §5.2, issue 26): withdrawing a once-grant after the call that used it, and the
90-day notice of high grants nobody uses. A part of :class:`~hashee_sdk.client.UserClient`,
which provides the state it names below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from hashee_sdk.consent_statements import sign_consent
from hashee_sdk.crypto import KeyPair
from hashee_sdk.errors import ApiError, ManifestUnverified, SdkError
from hashee_sdk.grants import Notice, UnusedGrant
from hashee_sdk.keys import KeyDirectory
from hashee_sdk.policy import SensitivityPolicy
from hashee_sdk.rest import Transport, call_api
from hashee_sdk.store import LocalStore
from hashee_sdk.trust import VerifiedManifest
from hashee_sdk.views import RelationView, RelationViews, public_identity

logger = logging.getLogger(__name__)
UNUSED_DAYS = 90  # a high-sensitivity grant unused this long is offered for withdrawal (issue 26)
MAX_RELATION_PAGES = 100


def _options_member(grant_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The request's ``grant_options`` member: absent when there are none (signed as ``{}``)."""
    return {"grant_options": dict(grant_options)} if grant_options else {}


class DeviceConsent:
    """The consent half of a user's device."""

    transport: Transport
    keys: KeyPair
    keydir: KeyDirectory
    views: RelationViews
    store: LocalStore
    clock: Callable[[], float]
    policy: SensitivityPolicy
    on_notice: Callable[[Notice], Any] | None
    _reported: set[tuple[str, str]]
    _views: dict[str, RelationView]

    async def relation(self, relation_id: str, *, refresh: bool = False) -> RelationView:
        raise NotImplementedError  # the client's: its cached, verified view

    def _invalidate(self, *relation_ids: str) -> None:
        raise NotImplementedError  # the client's: drops cached views

    # --- consent signed on this device (SPEC §9.6) ------------------------------------

    async def grant(self, agent_id: str, scopes: Iterable[str], *, user_id: str | None = None,
                    grant_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Connect to an agent (``POST /h2a/relations``) with a consent statement signed by
        this device for the agent's current verified manifest. ``user_id``: the user's id as
        relations show it (``user``); by default read from the user's other relations.
        ``grant_options`` (SPEC §5.2): per scope ``{"once": true}``, ``{"until": <epoch ms>}``
        and/or ``{"arguments": {tool: schema}}``, signed as sent. Returns the created
        relation. Raises ManifestUnverified, ApiError."""
        agent_id, granted = str(agent_id), sorted(set(scopes))
        agent = await call_api(self.transport, "GET", f"/agents/{agent_id}")
        served_identity = await self.keydir.served_identity(agent_id)
        current = self.views.current(agent_id, agent, public_identity(served_identity))
        user_id = user_id if user_id is not None else await self._user_id()
        signed = self._sign(agent_id, user_id, granted, (current.version, current.hash), grant_options)
        relation = await call_api(self.transport, "POST", "/h2a/relations", json={
            "agent_id": agent_id, "granted_scopes": granted, **_options_member(grant_options),
            "consent_statement": signed})
        relation_id = str(relation["relation_id"])
        self.keydir.pins.identity(relation_id, agent_id, served_identity)  # what the user consented under
        self._signed(relation_id, signed)
        return dict(relation)

    async def reconsent(self, relation_id: str, scopes: Iterable[str], *,
                        grant_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Change the grants of a relation, or consent again to the agent's current verified
        manifest (``PATCH``), signed by this device, with ``grant_options`` as :meth:`grant`.
        A once-grant used here whose withdrawal the server has not taken yet is left out.
        Returns the relation. Raises ManifestUnverified (IdentityChanged: accept the new
        safety number first), ApiError."""
        relation_id = str(relation_id)
        spent = self.store.unwithdrawn_once(relation_id)
        granted = sorted(set(scopes) - spent)
        options = {s: o for s, o in (grant_options or {}).items() if s not in spent} if grant_options else grant_options
        relation, current = await self._verified_current(relation_id)
        updated = await self._patch(relation_id, relation, granted, options, (current.version, current.hash))
        self.store.once_withdrawn(relation_id, spent)
        return updated

    async def withdraw(self, relation_id: str, *scopes: str) -> dict[str, Any]:
        """Withdraw ``scopes`` and nothing else (``PATCH``, signed): the grants and options the
        user gave (the newest verified statement's; the server's when there is none) without
        them, acknowledging the version the user consented to — never a newer one. Raises
        ManifestUnverified, ApiError (``VERSION_CONFLICT`` when the server wants a re-consent)."""
        relation_id = str(relation_id)
        view = await self.relation(relation_id, refresh=True)
        if view.acknowledgement is None:
            raise ManifestUnverified(view.unverified or f"relation {relation_id}: what the user consented to is unknown")
        statement = self.views.consents.newest(relation_id)
        kept = [s for s in (statement["granted_scopes"] if statement is not None else view.granted)
                if s not in scopes and s in view.grants and not view.grants[s].unreadable]
        options = dict(statement["grant_options"]) if statement is not None else dict(view.served_options)
        relation = await call_api(self.transport, "GET", f"/h2a/relations/{relation_id}")
        updated = await self._patch(relation_id, relation, sorted(kept),
                                    {s: o for s, o in options.items() if s in kept} or None, view.acknowledgement)
        self.store.once_withdrawn(relation_id, scopes)
        return updated

    async def _patch(self, relation_id: str, relation: Mapping[str, Any], granted: list[str],
                     options: Mapping[str, Any] | None, acknowledged: tuple[int, str]) -> dict[str, Any]:
        signed = self._sign(str(relation["agent_id"]), str(relation.get("user")), granted, acknowledged, options)
        updated = await call_api(self.transport, "PATCH", f"/h2a/relations/{relation_id}", json={
            "granted_scopes": granted, **_options_member(options), "acknowledged_manifest_version": acknowledged[0],
            "acknowledged_manifest_hash": acknowledged[1], "consent_statement": signed})
        self._signed(relation_id, signed)
        return dict(updated)

    async def revoke(self, relation_id: str) -> dict[str, Any]:
        """Revoke a relation (``DELETE``) with a signed revocation. It is revoked for this
        device at once, whatever the server answers now or later. Raises ApiError."""
        relation_id = str(relation_id)
        self.store.tombstone_relation(relation_id)
        self._invalidate(relation_id)
        relation, current = await self._verified_current(relation_id)
        signed = self._sign(str(relation["agent_id"]), str(relation.get("user")), [], (current.version, current.hash),
                            None, revoked=True)
        revoked = await call_api(self.transport, "DELETE", f"/h2a/relations/{relation_id}",
                                 json={"consent_statement": signed})
        self._signed(relation_id, signed)
        return dict(revoked)

    # --- the 90-day notice (issue 26: Android's auto-reset, decided on the device) --------

    async def unused_grants(self, *, days: float = UNUSED_DAYS, now: float | None = None) -> list[UnusedGrant]:
        """The granted scopes of ``high`` sensitivity (as this device enforces it) of the
        user's live relations that this device has not answered a call of for ``days`` (or,
        never used, that were granted that long ago), each told to the user once through
        ``on_notice`` with an offer to withdraw it (:meth:`withdraw`). ``now``: epoch
        seconds (default: the device's clock). Raises ApiError."""
        now = self.clock() if now is None else now
        found = []
        for relation_id in await self._live_relation_ids():
            view = await self.relation(relation_id)
            if view.revoked or view.consent_revoked or view.manifest_version is None:
                continue
            levels = {tool.scope: tool.sensitivity for tool in view.manifest.tools.values()}
            last_used = self.store.grant_last_used(relation_id)
            live = {scope for scope, grant in view.grants.items() if not grant.expired(now)}  # past until: gone
            for scope in sorted(live - view.spent):
                since = last_used.get(scope)
                if levels.get(scope) == "high" and since is not None and since <= (now - days * 86400) * 1000:
                    found.append(UnusedGrant(relation_id, view.agent_id, scope, since / 1000, view.agent_name))
        for unused in found:
            self._notice("unused_grant", unused.relation_id, unused.agent_id, unused.scope, unused.text(now))
        return found

    async def _live_relation_ids(self) -> list[str]:
        ids, path = [], "/h2a/relations"
        for _ in range(MAX_RELATION_PAGES):
            page = await call_api(self.transport, "GET", path)
            ids += [str(r["relation_id"]) for r in page.get("results") or []
                    if isinstance(r, Mapping) and r.get("status") != "revoked" and isinstance(r.get("relation_id"), str)]
            following = page.get("next")
            if not isinstance(following, str) or not following:
                break
            parts = urlsplit(following)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
        return ids

    async def _verified_current(self, relation_id: str) -> tuple[Mapping[str, Any], VerifiedManifest]:
        relation = await call_api(self.transport, "GET", f"/h2a/relations/{relation_id}")
        agent_id = str(relation["agent_id"])
        agent = await call_api(self.transport, "GET", f"/agents/{agent_id}")
        return relation, self.views.current(agent_id, agent, await self.keydir.identity(relation_id, agent_id))

    async def _user_id(self) -> str:
        page = await call_api(self.transport, "GET", "/h2a/relations")
        users = {r.get("user") for r in (page.get("results") or []) if isinstance(r, Mapping)}
        if len(users) != 1 or not isinstance(next(iter(users)), str):
            raise ValueError("the user's id is not known from their relations: pass user_id")
        return str(next(iter(users)))

    def _sign(self, agent_id: str, user_id: str, granted: list[str], acknowledged: tuple[int, str],
              grant_options: Mapping[str, Any] | None, *, revoked: bool = False) -> dict[str, Any]:
        now_ms = int(self.clock() * 1000)
        return sign_consent(self.keys, agent_id=agent_id, user_id=user_id, granted_scopes=granted,
                            acknowledged_manifest_version=acknowledged[0], acknowledged_manifest_hash=acknowledged[1],
                            seq=self.views.consents.next_seq(agent_id=agent_id, user_id=user_id, now_ms=now_ms),
                            ts=now_ms, grant_options=grant_options, revoked=revoked)

    def _signed(self, relation_id: str, signed: Mapping[str, Any]) -> None:
        """The server accepted a statement this device signed: it is the newest verified one."""
        self.views.consents.remember(relation_id, signed)
        if signed["statement"]["revoked"]:
            self.store.tombstone_relation(relation_id)
        else:
            self.store.confirm_grants(relation_id, signed["statement"]["granted_scopes"])
        self._invalidate(relation_id)
        self.policy.forget(agent_id=str(signed["statement"]["agent_id"]))

    async def retry_withdrawals(self) -> None:
        """Withdraw again every used once-grant whose signed withdrawal the server has not
        taken yet (after a restart, or once the server is reachable); the device refuses them
        meanwhile either way."""
        for relation_id in self.store.relations_with_unwithdrawn_once():
            await self._withdraw_spent(relation_id)

    async def _withdraw_spent(self, relation_id: str) -> None:
        """After answering the call that used a once-grant: withdraw it with a signed PATCH.
        If the server does not take it, the scope stays refused here, the user is told, and
        their next consent signed here leaves it out."""
        spent = sorted(self.store.unwithdrawn_once(relation_id))
        try:
            await self.withdraw(relation_id, *spent)
        except SdkError as exc:
            code = exc.code if isinstance(exc, ApiError) else type(exc).__name__
            logger.warning("relation %s: used once-grants %s not withdrawn on the server: %s", relation_id,
                           ", ".join(spent), code)
            view = self._views.get(relation_id)
            for scope in spent:
                self._notice("once_not_withdrawn", relation_id, view.agent_id if view is not None else "", scope,
                             f"{scope} was granted only this time and has been used: this device refuses it from "
                             f"now on, but the server did not take its withdrawal ({code}). Your next consent "
                             f"leaves it out.")

    def _notice(self, kind: str, relation_id: str, agent_id: str, scope: str, text: str) -> None:
        """Tell the user (once per kind, relation and scope): the ``on_notice`` callback, and the log."""
        if (relation_id, f"{kind}:{scope}") in self._reported:
            return
        self._reported.add((relation_id, f"{kind}:{scope}"))
        logger.warning("notice to the user: %s", text)
        if self.on_notice is not None:
            try:
                self.on_notice(Notice(kind, relation_id, agent_id, scope, text))
            except Exception as exc:  # a broken notice callback never stops the device
                logger.warning("on_notice failed: %s", type(exc).__name__)
