"""Idempotency keys as Stripe keeps them: 24 h; a replay returns the first response,
the same key with a different body is 422, a concurrent duplicate 409 and stores nothing.
Only successful responses are kept: a failed request releases its key."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from hashee.errors import HasheeError
from toolcalls.models import IdempotencyKey

TTL = timedelta(hours=24)
MAX_KEY_LENGTH = 255


def fingerprint(*, method: str, path: str, body: Any) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{method} {path}\n{text}".encode()).hexdigest()


def idempotency_begin(*, principal: str, key: str, fingerprint: str) -> IdempotencyKey | dict[str, Any]:
    """Claim the key (committed at once), or return the stored response to replay.

    Raises IDEMPOTENCY_KEY_REUSED (422) or IDEMPOTENCY_KEY_IN_USE (409).
    """
    if not key or len(key) > MAX_KEY_LENGTH:
        raise HasheeError("VALIDATION_ERROR", f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters.",
                          [{"path": "/Idempotency-Key", "code": "INVALID_VALUE", "message": "bad length"}])
    IdempotencyKey.objects.filter(principal=principal, key=key, created_at__lt=timezone.now() - TTL).delete()
    try:
        with transaction.atomic():
            return IdempotencyKey.objects.create(principal=principal, key=key, fingerprint=fingerprint)
    except IntegrityError:
        pass
    existing = IdempotencyKey.objects.filter(principal=principal, key=key).first()
    if existing is None:  # released between our insert and read: the caller may retry
        raise HasheeError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is in progress.")
    if existing.fingerprint != fingerprint:
        raise HasheeError("IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request.")
    if existing.state != IdempotencyKey.State.COMPLETED:
        raise HasheeError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is in progress.")
    return {"status": existing.response_status, "body": existing.response_body,
            "headers": existing.response_headers}


def idempotency_complete(*, claim: IdempotencyKey, status: int, body: Any, headers: dict[str, str]) -> None:
    """Store the response (call inside the transaction that did the work)."""
    IdempotencyKey.objects.filter(pk=claim.pk).update(
        state=IdempotencyKey.State.COMPLETED, response_status=status, response_body=body, response_headers=headers)


def idempotency_release(*, claim: IdempotencyKey) -> None:
    IdempotencyKey.objects.filter(pk=claim.pk, state=IdempotencyKey.State.IN_PROGRESS).delete()


def idempotency_purge() -> int:
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=timezone.now() - TTL).delete()
    return deleted
