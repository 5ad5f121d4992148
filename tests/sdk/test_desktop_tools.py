"""The standard tools a Python device serves (SPEC §12.1), answered through the whole
device chain: read_file within the shared folder, send_notification through the app's
notifier, and the platform's own refusal as ``denied: user_refused``."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from hashee_sdk import desktop_tools
from hashee_sdk.core.device_tools import MAX_FILE_BYTES, standard_tool
from hashee_sdk.device_tools import file_result
from hashee_sdk.tools import handlers
from tests.sdk.test_client import answer, make_client, statuses, tool_call


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "notes.txt").write_text("héllo", encoding="utf-8")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00")
    (tmp_path / "secret.txt").write_text("not yours")
    return folder


def read(shared: Path, path: str, **options: Any) -> dict[str, Any]:
    client = make_client(handlers=handlers(desktop_tools(shared=shared, **options)))
    return answer(client, tool_call("read_file", arguments={"path": path}))[0]


def test_bob_shares_a_text_file_and_the_agent_gets_its_text(shared: Path) -> None:
    response = read(shared, "notes.txt")

    assert response["status"] == "ok"
    assert response["result"] == {"name": "notes.txt", "media_type": "text/plain", "size": 6, "text": "héllo"}


def test_a_binary_file_comes_back_as_base64(shared: Path) -> None:
    result = read(shared, "photo.png")["result"]

    assert (result["media_type"], result["size"]) == ("image/png", 10)
    assert base64.b64decode(result["base64"]) == (shared / "photo.png").read_bytes()


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "link-out"])
def test_a_path_outside_the_shared_folder_is_refused_by_the_platform(shared: Path, path: str) -> None:
    (shared / "link-out").symlink_to(shared.parent / "secret.txt")

    assert statuses([read(shared, path)]) == [("denied", "user_refused")]


def test_a_missing_or_too_large_file_is_a_platform_error(shared: Path) -> None:
    (shared / "big.bin").write_bytes(b"\0" * (MAX_FILE_BYTES + 1))

    assert statuses([read(shared, "missing.txt"), read(shared, "big.bin")]) == [
        ("error", "TOOL_PLATFORM_ERROR"), ("error", "TOOL_PLATFORM_ERROR")]


def test_notifications_go_through_the_apps_notifier(shared: Path) -> None:
    shown: list[tuple[str, str | None]] = []
    send = handlers(desktop_tools(shared=shared, show=lambda t, b: shown.append((t, b))))["send_notification"]

    assert send({"title": "Tea", "body": "is ready"}) == {"shown": True} and shown == [("Tea", "is ready")]


def test_a_tool_the_desktop_cannot_serve_is_tool_unavailable(shared: Path) -> None:
    client = make_client(handlers=handlers(desktop_tools(shared=shared)))

    assert statuses(answer(client, tool_call("locate"))) == [("error", "TOOL_UNAVAILABLE")]


def test_without_a_notifier_the_device_serves_only_read_file(shared: Path) -> None:
    assert [t.name for t in desktop_tools(shared=shared)] == ["read_file"]


@pytest.mark.parametrize("data", [b"plain text", b"\xff\xfe binary"])
def test_every_result_conforms_to_the_standard_output_schema(data: bytes) -> None:
    import jsonschema

    jsonschema.validate(file_result("f", data), standard_tool("read_file")["output_schema"])
