"""Signal receivers of the agents app, connected once in ``AgentsConfig.ready()``."""

from __future__ import annotations

from typing import Any

from agents import services
from agents.models import Agent


def record_manifest_version(sender: type[Agent], instance: Agent, raw: bool = False,
                            update_fields: frozenset[str] | None = None, **kwargs: Any) -> None:
    """A save outside the services (shell, commands) records a changed manifest as a
    version; the services record theirs themselves, with its signature and author, and
    save the other fields by name, which cannot change the manifest."""
    if raw:  # loaddata restores rows as they were, versions included
        return
    if update_fields is not None and "capability_manifest" not in update_fields:
        return
    services.manifest_version_record(agent=instance)
