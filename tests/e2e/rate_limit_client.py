"""Runs in a spawned process: fires concurrent tool calls at the workers (round robin)."""

from __future__ import annotations

import asyncio
from typing import Any


async def _fire(urls: list[str], relation_id: str, secret: str, count: int, offset: int) -> list[int]:
    import httpx

    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as client:
        async def one(i: int) -> int:
            url = f"{urls[(offset + i) % len(urls)]}/h2a/relations/{relation_id}/messages"
            body = {"msg_subtype": "artifact_tool_call", "content_type": "artifact",
                    "payload": {"v": 1, "ciphertext": f"opaque-{offset}-{i}"}}
            response = await client.post(url, json=body)
            return response.status_code

        return list(await asyncio.gather(*(one(i) for i in range(count))))


def fire(urls: list[str], relation_id: str, secret: str, count: int, offset: int, start: Any) -> list[int]:
    start.wait()
    return asyncio.run(_fire(urls, relation_id, secret, count, offset))
