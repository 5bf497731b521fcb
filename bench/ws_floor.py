"""The bare websockets broadcast floor of the websocket row: ``python -m bench.ws_floor PORT``.

A ``websockets`` server with no Django, no layer and no database: a text frame from one client of
a path is sent, as is, to every other client of that path with ``websockets.broadcast``. It is the
least work that gets one message to N sockets of one process.
"""

from __future__ import annotations

import asyncio
import sys
from collections import defaultdict
from typing import Any

from websockets.asyncio.server import broadcast, serve


async def serve_forever(port: int) -> None:
    """Serve on 127.0.0.1:``port`` until killed."""
    groups: dict[str, set[Any]] = defaultdict(set)

    async def handler(socket: Any) -> None:
        group = groups[socket.request.path]
        group.add(socket)
        try:
            async for message in socket:
                broadcast([other for other in group if other is not socket], message)
        finally:
            group.discard(socket)

    async with serve(handler, "127.0.0.1", port, max_size=2**20, ping_interval=None):
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(serve_forever(int(sys.argv[1])))
