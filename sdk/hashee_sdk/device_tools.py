"""The standard device tools (SPEC §12.1) that a desktop process can serve, for
:class:`~hashee_sdk.Device`: ``read_file`` (within a folder the user shares) and, with a way
to show one, ``send_notification``. ``read_clipboard`` and ``get_location`` have no
portable desktop source: a Python device without them answers ``error: TOOL_UNAVAILABLE``,
as SPEC §12.1 says of a platform without the capability.

    async with Device(url, key, tools=desktop_tools(shared=Path("~/Shared")), …): …
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from hashee_sdk.core.device_tools import MAX_FILE_BYTES, standard_tool
from hashee_sdk.errors import PlatformRefused, SdkError
from hashee_sdk.tools import Tool, tool

Show = Callable[[str, "str | None"], Any]


class FileTooLarge(SdkError):  # noqa: N818
    """read_file: over 1 MiB (answered ``error: TOOL_PLATFORM_ERROR``)."""


def read_file_tool(*, shared: Path) -> Tool:
    """``read_file`` over the files under ``shared`` (symbolic links resolved first): a path
    outside it is refused by the platform, whatever the user approved."""
    root = shared.expanduser().resolve()

    def read_file(path: Annotated[str, Field(max_length=1024)]) -> dict[str, Any]:
        target = (root / Path(path).expanduser()).resolve()
        if not target.is_relative_to(root):
            raise PlatformRefused("read_file reads only within the folder this device shares")
        if target.stat().st_size > MAX_FILE_BYTES:
            raise FileTooLarge(f"{target.name} is larger than {MAX_FILE_BYTES} bytes")
        return file_result(target.name, target.read_bytes())

    return tool(scope="filesystem:read", description=standard_tool("read_file")["description"])(read_file)


def file_result(name: str, data: bytes) -> dict[str, Any]:
    """read_file's result: ``text`` for UTF-8, ``base64`` otherwise (SPEC §12.1)."""
    guessed = mimetypes.guess_type(name)[0]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"name": name, "media_type": guessed or "application/octet-stream", "size": len(data),
                "base64": base64.b64encode(data).decode("ascii")}
    return {"name": name, "media_type": guessed or "text/plain", "size": len(data), "text": text}


def send_notification_tool(show: Show) -> Tool:
    """``send_notification`` through ``show(title, body)`` (a desktop notifier, a tray icon)."""

    def send_notification(title: Annotated[str, Field(min_length=1, max_length=120)],
                          body: Annotated[str | None, Field(max_length=1000)] = None) -> dict[str, Any]:
        show(title, body)
        return {"shown": True}

    return tool(scope="notification:send", description=standard_tool("send_notification")["description"])(
        send_notification)


def desktop_tools(*, shared: Path, show: Show | None = None) -> list[Tool]:
    """The standard tools this process can serve: ``read_file`` under ``shared`` and, given
    ``show``, ``send_notification``."""
    tools = [read_file_tool(shared=shared)]
    if show is not None:
        tools.append(send_notification_tool(show))
    return tools
