"""Signal receivers of the project's own app, connected once in ``HasheeConfig.ready()``.

Users are Django's: the admin, ``createsuperuser`` or a shell deactivate them by saving
the model, and logout is Django's view. These receivers only tell the sockets that
stood on that user or session to close (eventlog.access), in the same transaction.
"""

from __future__ import annotations

from typing import Any

from eventlog.access import session_digest
from eventlog.services import sockets_close


def user_saved(sender: type[Any], instance: Any, created: bool = False, raw: bool = False, **kwargs: Any) -> None:
    """A deactivated user's sockets close (closing none is harmless: no transition check)."""
    if not raw and not created and not instance.is_active:
        sockets_close(reason="user_deactivated", value=instance.pk)


def user_deleted(sender: type[Any], instance: Any, **kwargs: Any) -> None:
    sockets_close(reason="user_deactivated", value=instance.pk)


def user_logged_out(sender: type[Any], request: Any, user: Any = None, **kwargs: Any) -> None:
    """The sockets this browser session opened close with it."""
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    if session_key:
        sockets_close(reason="session_ended", value=session_digest(session_key))
