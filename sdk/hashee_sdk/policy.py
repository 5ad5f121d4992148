"""The sensitivity policy (SPEC §6 step 5). The clock is a parameter (``now``, epoch seconds).

* ``low``: silent.
* ``medium``: prompt the first time; after an approval, silent for a 24 h *sliding*
  window per (device, session, agent, scope) — every silent use pushes the end of the
  window to ``now + 24 h``. A refusal or a timeout opens no window.
* ``high`` (and any level this SDK does not know, fail safe): prompt every call.

Windows live in memory: a new session starts with none, which is what "per session" means.
"""

from __future__ import annotations

from typing import NamedTuple

MEDIUM_WINDOW_S = 24 * 3600.0
HIGH_PROMPT_TIMEOUT_S = 30.0
MAX_WINDOWS = 10000


class PolicySubject(NamedTuple):
    """Who is asked: this device, this session, on behalf of this agent."""

    device_id: str
    session_id: str
    agent_id: str


class SensitivityPolicy:
    def __init__(self, *, medium_window_s: float = MEDIUM_WINDOW_S) -> None:
        self.medium_window_s = medium_window_s
        self._ends: dict[tuple[str, str, str, str], float] = {}

    def is_silent(self, subject: PolicySubject, scope: str, sensitivity: str, now: float) -> bool:
        """True when this call needs no prompt."""
        if sensitivity == "low":
            return True
        if sensitivity != "medium":
            return False
        end = self._ends.get((*subject, scope))
        return end is not None and now < end

    def record_use(self, subject: PolicySubject, scope: str, sensitivity: str, now: float) -> None:
        """After an approved prompt or a silent use: (re)start the medium window at ``now``."""
        if sensitivity != "medium":
            return
        if len(self._ends) >= MAX_WINDOWS:
            self._ends = {key: end for key, end in self._ends.items() if end > now}
        self._ends[(*subject, scope)] = now + self.medium_window_s

    def forget(self, *, agent_id: str | None = None) -> None:
        """Close every window (of one agent): e.g. when its relation is revoked."""
        self._ends = {key: end for key, end in self._ends.items() if agent_id is not None and key[2] != agent_id}
