"""``async with`` runtimes: an agent and a user device that own their socket listener.

:class:`Agent` wraps :class:`~hashee_sdk.AgentRuntime`: on entry it takes its key pair from a
:class:`~hashee_sdk.KeyStore` (made on first use), fetches the published manifest unless
given one, publishes its key (when given the agent key, not short-lived tokens), and starts listening on ``/ws/agent`` from the cursor kept in
the key store's state (so a restart resumes where the last run stopped); on exit it stops
the listener and closes the state. ``call_tool`` refuses at once with :class:`NotListening`
while no socket is connected, since no answer could reach it (the call would only time out).

:class:`Device` does the same for a user's device (:class:`~hashee_sdk.UserClient`) serving
``@tool`` functions on ``/ws/events``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import httpx

from hashee_sdk import statements
from hashee_sdk.agent import AgentRuntime, ToolResult
from hashee_sdk.client import PromptCallback, UserClient
from hashee_sdk.credentials import Credential
from hashee_sdk.errors import SdkError
from hashee_sdk.grants import UnusedGrant
from hashee_sdk.keys import KeyDirectory
from hashee_sdk.keystore import KeyStore
from hashee_sdk.rest import HttpxTransport, Transport, call_api
from hashee_sdk.tools import Tool, handlers

CONNECT_TIMEOUT_S = 15.0


class NotListening(SdkError):  # noqa: N818 - named as the SDK's other errors
    """``call_tool`` without a connected listener: no answer could arrive."""


class _Listener:
    """One listener task and whether its socket is connected now."""

    def __init__(self) -> None:
        self.connected = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self, listen: Any, timeout_s: float) -> None:
        self.task = asyncio.create_task(listen(connected=self.connected))
        waiting = asyncio.create_task(self.connected.wait())
        done, _ = await asyncio.wait({self.task, waiting}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self.task in done:
            self.task.result()  # e.g. SocketRefused: the key is not accepted
        if waiting not in done:  # (connected once is enough: a drop since is reconnecting)
            await self.stop()
            raise NotListening(f"the event socket did not connect within {timeout_s:g} s")

    def check(self) -> None:
        if self.task is None or self.task.done():
            raise NotListening("no listener runs: use the runtime inside `async with`")
        if not self.connected.is_set():
            raise NotListening("the event socket is not connected (reconnecting); no answer could arrive")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, SdkError):
                await self.task


class Agent:
    """An agent runtime for ``async with``. ``url`` is the server, ``agent_key`` its ``hak_``
    key or a credential of short-lived tokens (:class:`~hashee_sdk.TokenSource`), which the
    transport and the listener renew; ``manifest`` defaults to the one the agent publishes.
    A token may not publish the runtime's key: with one, publish it first with the key
    (:func:`publish_runtime_key`, e.g. in the parent process that hands out the tokens)."""

    def __init__(self, url: str, agent_key: str | Credential, *, agent_id: str, keystore: KeyStore,
                 manifest: Mapping[str, Any] | None = None, transport: Transport | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, **options: Any) -> None:
        self.url, self._key, self.agent_id, self.keystore = url, agent_key, str(agent_id), keystore
        self.manifest = manifest
        self.transport = transport if transport is not None else HttpxTransport(url, agent_key)
        self.connect_timeout_s = connect_timeout_s
        self.options = options
        self.listener = _Listener()
        self._runtime: AgentRuntime | None = None

    @property
    def runtime(self) -> AgentRuntime:
        if self._runtime is None:
            raise NotListening("the agent runtime starts in `async with`")
        return self._runtime

    async def __aenter__(self) -> Agent:
        manifest = self.manifest
        if manifest is None:
            manifest = (await call_api(self.transport, "GET", f"/agents/{self.agent_id}"))["capability_manifest"]
        self._runtime = AgentRuntime(transport=self.transport, agent_id=self.agent_id, manifest=manifest,
                                     keys=self.keystore.key_pair("agent"), store=self.keystore.local_store(),
                                     **self.options)
        try:
            if isinstance(self._key, str):
                await self._runtime.register_key()
            await self.listener.start(lambda **kw: self.runtime.listen(self.url, self._key, **kw),
                                      self.connect_timeout_s)
        except BaseException:
            self._runtime.store.close()
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.listener.stop()
        self.runtime.store.close()

    async def call_tool(self, relation_id: str, name: str, arguments: Mapping[str, Any], **options: Any) -> ToolResult:
        """:meth:`AgentRuntime.call_tool`; raises NotListening at once when no socket is connected."""
        self.listener.check()
        return await self.runtime.call_tool(relation_id, name, arguments, **options)


async def publish_runtime_key(url: str, agent_key: str, *, agent_id: str, keystore: KeyStore,
                              identity_key: Mapping[str, str] | None = None,
                              http: httpx.AsyncBaseTransport | None = None) -> dict[str, Any]:
    """Publish the key store's runtime key pair with the agent key: the one step an
    :class:`Agent` holding only a token cannot take (so a stolen token cannot publish a key
    the users' devices would trust). ``identity_key`` signs it for an identified agent."""
    transport = HttpxTransport(url, agent_key, http=http)
    try:
        keys = keystore.key_pair("agent")
        signature = (statements.sign_runtime_key(identity_key, agent_id=str(agent_id), key_id=keys.key_id)
                     if identity_key is not None else None)
        return await KeyDirectory(transport).register_agent_key(str(agent_id), keys.public,
                                                                identity_signature=signature)
    finally:
        await transport.aclose()


class Device:
    """A user's device for ``async with``, serving ``tools``. ``prompt`` approves a call
    (sync or async, True to run it); ``user_key`` is the user's ``hsk_`` key."""

    def __init__(self, url: str, user_key: str, *, tools: Iterable[Tool], keystore: KeyStore,
                 prompt: PromptCallback, device_id: str = "device-1", transport: Transport | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, **options: Any) -> None:
        self.url, self._key, self.keystore = url, user_key, keystore
        self.client = UserClient(transport=transport if transport is not None else HttpxTransport(url, user_key),
                                 keys=keystore.key_pair("device"), device_id=device_id, prompt=prompt,
                                 handlers=handlers(tools), audit=keystore.audit_log(), **options)
        self.connect_timeout_s = connect_timeout_s
        self.listener = _Listener()

    async def __aenter__(self) -> Device:
        try:
            await self.client.register_device()
            await self.listener.start(lambda **kw: self.client.listen(self.url, self._key, **kw),
                                      self.connect_timeout_s)
        except BaseException:
            self._close()
            raise
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.listener.stop()
        self._close()

    async def grant(self, agent_id: str, scopes: Iterable[str], **options: Any) -> dict[str, Any]:
        """:meth:`UserClient.grant`: connect to an agent, the consent (and ``grant_options``)
        signed by this device."""
        return await self.client.grant(agent_id, scopes, **options)

    async def reconsent(self, relation_id: str, scopes: Iterable[str], *,
                        grant_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`UserClient.reconsent`: change the grants (and their options) or consent again,
        signed by this device."""
        return await self.client.reconsent(relation_id, scopes, grant_options=grant_options)

    async def withdraw(self, relation_id: str, scope: str) -> dict[str, Any]:
        """:meth:`UserClient.withdraw`: withdraw one scope, signed by this device."""
        return await self.client.withdraw(relation_id, scope)

    async def unused_grants(self, days: float = 90, now: float | None = None) -> list[UnusedGrant]:
        """:meth:`UserClient.unused_grants`: high grants this device has not used for ``days``."""
        return await self.client.unused_grants(days=days, now=now)

    async def revoke(self, relation_id: str) -> dict[str, Any]:
        """:meth:`UserClient.revoke`: revoke the relation, signed by this device."""
        return await self.client.revoke(relation_id)

    async def serve_forever(self) -> None:
        """Answer tool calls until cancelled; raises what stopped the listener (e.g. SocketRefused)."""
        self.listener.check()
        assert self.listener.task is not None
        await self.listener.task

    def _close(self) -> None:
        self.client.store.close()
        self.client.audit.close()
