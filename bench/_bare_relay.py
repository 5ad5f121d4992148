"""The floor a tool call is compared with: a bare uvicorn relay of the same shape and
nothing else (no database, no authentication, no rule). A client POSTs a body to
``/send/<side>``; the server writes it as one text frame on the socket ``/ws/<side>``
holds and answers ``202 {"message_id": …}``. bench/floor.py runs it beside the real
server and times agent → device → agent through both with the same client libraries.

Run: uvicorn bench._bare_relay:app --port P --no-access-log --ws-per-message-deflate false
"""

from __future__ import annotations

import itertools
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

sockets: dict[str, WebSocket] = {}
ids = itertools.count(1)


async def send(request: Request) -> JSONResponse:
    body = (await request.body()).decode()
    socket = sockets.get(request.path_params["side"])
    if socket is None:
        return JSONResponse({"error": "nobody listens"}, status_code=404)
    message_id = next(ids)
    await socket.send_text(body)
    return JSONResponse({"message_id": message_id}, status_code=202)


async def hold(websocket: WebSocket) -> None:
    side = websocket.path_params["side"]
    await websocket.accept()
    sockets[side] = websocket
    try:
        while True:
            await websocket.receive_text()
    except WebSocketDisconnect:
        pass
    finally:
        if sockets.get(side) is websocket:
            del sockets[side]


routes: list[Any] = [Route("/send/{side}", send, methods=["POST"]), WebSocketRoute("/ws/{side}", hold)]
app = Starlette(routes=routes)
