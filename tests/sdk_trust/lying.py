"""A server that lies (SPEC §9's threat model): a transport between the SDK and a server —
the fake one of tests/sdk or the real one — that rewrites what the server answers."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from hashee_sdk.core.canonical import canonical_hash
from hashee_sdk.rest import HttpResponse, Transport

Rewrite = Callable[[Any], Any]


class LyingTransport:
    """Forwards every request to ``inner``; the answer to a ``GET`` of a path that ends with
    a registered suffix is rewritten by that rule (the body is a copy, change it freely)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.rules: list[tuple[str, Rewrite]] = []

    def lie(self, path_suffix: str, rewrite: Rewrite) -> None:
        self.rules.append((path_suffix, rewrite))

    async def request(self, method: str, path: str, *, json: Any = None,
                      headers: Mapping[str, str] | None = None) -> HttpResponse:
        response = await self.inner.request(method, path, json=json, headers=headers)
        body = response.body
        for suffix, rewrite in self.rules:
            if method == "GET" and path.split("?")[0].endswith(suffix) and 200 <= response.status < 300:
                changed = rewrite(copy.deepcopy(body))
                body = body if changed is None else changed
        return HttpResponse(response.status, body, response.headers)


def add_agent_key(keys: Mapping[str, str]) -> Rewrite:
    """The key directory lists one more runtime key for the agent."""
    def rewrite(body: Any) -> Any:
        body["agent"]["keys"].append(dict(keys))
        return body
    return rewrite


def add_device(device: Mapping[str, Any]) -> Rewrite:
    """The key directory lists one more device for the user."""
    def rewrite(body: Any) -> Any:
        body["user"]["devices"].append(dict(device))
        return body
    return rewrite


def serve_manifest(change: Callable[[dict[str, Any]], None]) -> Rewrite:
    """``GET /agents/{id}`` serves a changed manifest, with its hash recomputed to match."""
    def rewrite(body: Any) -> Any:
        change(body["capability_manifest"])
        body["capability_manifest_hash"] = canonical_hash(body["capability_manifest"])
        return body
    return rewrite


def settle_relation(body: Any) -> Any:
    """``GET /h2a/relations/{id}`` hides a pending re-consent: active, nothing pending."""
    body["status"] = "active"
    body["pending_scopes"] = []
    return body
