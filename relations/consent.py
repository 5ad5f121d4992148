"""Consent signed on the user's device (SPEC §9.6): what the server checks of a consent
statement before a grant, a re-consent or a revocation changes anything.

The statement itself (its fields, signed bytes and signature) is the SDK's
(``hashee_sdk.consent_statements``): the server and both SDK sides check one definition.
Here it is compared with the request it came with, and ordered against the last one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hashee.errors import HasheeError
from hashee_sdk.consent_statements import ConsentInvalid, verify_consent
from hashee_sdk.crypto import PublicKeys

INVALID = "CONSENT_SIGNATURE_INVALID"
OUT_OF_ORDER = "CONSENT_OUT_OF_ORDER"
POINTER = "/consent_statement"


def consent_asked(*, agent_id: Any, user_id: str, granted_scopes: list[str], grant_options: Mapping[str, Any] | None,
                  acknowledged_manifest_version: int, acknowledged_manifest_hash: str,
                  revoked: bool) -> dict[str, Any]:
    """What a request changes, as the fields of a statement that consents to it must say it
    (all but ``seq``, ``ts`` and ``device_key_id``)."""
    return {"agent_id": str(agent_id), "user_id": user_id, "granted_scopes": sorted(set(granted_scopes)),
            "grant_options": dict(grant_options or {}),
            "acknowledged_manifest_version": acknowledged_manifest_version,
            "acknowledged_manifest_hash": acknowledged_manifest_hash, "revoked": revoked}


def consent_verify(signed: Any, *, asked: Mapping[str, Any], devices: Mapping[str, PublicKeys],
                   last_seq: int) -> dict[str, Any]:
    """The statement of ``signed`` once a trusted device of the user signed it (``devices``),
    it states exactly ``asked`` and its seq follows ``last_seq``.

    Raises CONSENT_SIGNATURE_INVALID (details point at what is wrong or differs from the
    request), CONSENT_OUT_OF_ORDER.
    """
    try:
        statement = verify_consent(signed, devices=devices)
    except ConsentInvalid as exc:
        raise HasheeError(INVALID, f"The consent statement was refused: {exc}.",
                          [_detail(exc.field, str(exc))]) from None
    differing = [name for name, value in asked.items() if statement[name] != value]
    if differing:
        raise HasheeError(INVALID, "The consent statement does not state this request: "
                          f"{', '.join(differing)} differ{'s' if len(differing) == 1 else ''}.",
                          [_detail(f"statement/{name}", f"the request's is {json.dumps(asked[name])}")
                           for name in differing])
    if statement["seq"] <= last_seq:
        raise HasheeError(OUT_OF_ORDER, f"The consent statement's seq must be greater than {last_seq}, the last one "
                          "of yours for this agent (a replayed or older statement).",
                          [{"path": f"{POINTER}/statement/seq", "code": OUT_OF_ORDER,
                            "message": f"must be greater than {last_seq}"}])
    return statement


def _detail(field: str, message: str) -> dict[str, str]:
    return {"path": f"{POINTER}/{field}" if field else POINTER, "code": INVALID, "message": message}
