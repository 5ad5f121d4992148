"""Signal receivers of the agents app, connected once in ``AgentsConfig.ready()``."""

from __future__ import annotations

from typing import Any

from agents import services
from agents.models import Agent


def record_manifest_version(sender: type[Agent], instance: Agent, raw: bool = False, **kwargs: Any) -> None:
    """Every save of an agent records its manifest as a version (no-op if unchanged)."""
    if raw:  # loaddata restores rows as they were, versions included
        return
    services.manifest_version_record(agent=instance)
