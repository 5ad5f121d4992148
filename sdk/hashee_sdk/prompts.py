"""The user's prompts on a device (SPEC §6 step 5): one at a time, at most ``max_waiting``
of one agent waiting (an agent flooding the user is answered ``user_timeout`` unasked), each
under its deadline; a prompt that fails or is not answered in time never approves
(sdk-js/src/prompts.ts)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hashee_sdk.runner import call_with_deadline

logger = logging.getLogger(__name__)
APPROVED = "approved"
MAX_WAITING_PROMPTS = 5


@dataclass(frozen=True)
class PromptRequest:
    """What the user is asked to approve (shown locally; never sent anywhere)."""

    relation_id: str
    agent_id: str
    call_id: str
    tool_name: str
    scope: str
    sensitivity: str
    arguments: dict[str, Any]
    agent_name: str = ""  # as the agent's owner named it (what the user consented to)
    tool_description: str = ""  # the manifest's description_fallback for this tool
    manifest_version: int | None = None  # the verified version the call runs under
    # SPEC §9.2: the relation's safety number (pinned identity + the user's first device);
    # None for an agent without an identity key: the prompt says its publisher is unverified.
    safety_number: str | None = None
    # The scope was granted since this device last looked (on the web, or by a server that
    # lies): the user confirms it here once, whatever its sensitivity.
    newly_granted: bool = False
    # How the user granted the scope, in words (SPEC §5.2 grant_options): "always", "only this
    # time", "until 18:00", "read_file only when path starts with /home/bob/docs/".
    grant: str = "always"


class Prompts:
    """The prompts of one device, in turn."""

    def __init__(self, prompt: Callable[[PromptRequest], Any], *, max_waiting: int = MAX_WAITING_PROMPTS) -> None:
        self.prompt = prompt
        self.max_waiting = max_waiting
        self._waiting: dict[str, int] = {}  # agent id → prompts waiting
        self._lock: asyncio.Lock | None = None  # made in the loop that prompts

    async def ask(self, agent_id: str, turn: Callable[[], tuple[PromptRequest, float] | None]) -> str:
        """The user's answer to ``agent_id``'s call: ``approved``, ``user_refused`` or
        ``user_timeout``. ``turn`` is made when the prompt's turn comes — the request and the
        seconds the user has — since an answer to an earlier prompt may make asking needless:
        None approves without asking."""
        if self._waiting.get(agent_id, 0) >= self.max_waiting:
            logger.warning("too many prompts waiting for agent %s: call answered user_timeout", agent_id)
            return "user_timeout"
        self._waiting[agent_id] = self._waiting.get(agent_id, 0) + 1
        try:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:  # one prompt at a time; a medium approval given meanwhile answers the next
                asked = turn()
                return APPROVED if asked is None else await self._show(*asked)
        finally:
            self._waiting[agent_id] -= 1

    async def _show(self, request: PromptRequest, timeout_s: float) -> str:
        if timeout_s <= 0:
            return "user_timeout"  # the agent has given up on this call
        try:
            answer = await call_with_deadline(self.prompt, request, timeout_s)
        except TimeoutError:
            return "user_timeout"
        except Exception as exc:  # a broken prompt never approves
            logger.warning("prompt failed: %s", type(exc).__name__)
            return "user_refused"
        return APPROVED if answer is True else "user_refused"
