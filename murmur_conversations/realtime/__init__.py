"""Live updates over Django Channels (docs/websocket.md). Imported only when Channels is installed,
except :func:`layer_is_process_local`, which works without it."""

from __future__ import annotations

from typing import Any


def layer_is_process_local(layer: Any = None) -> bool:
    """True when live events cannot leave this process: no channel layer (or Channels missing), the
    stock in-memory layer, or a layer class with ``process_local = True`` (ours). Consumers then
    tail the database; commands that stream deltas warn with it. ``layer`` defaults to the default
    channel layer."""
    if layer is None:
        try:
            from channels.layers import get_channel_layer
        except ImportError:
            return True
        layer = get_channel_layer()
        if layer is None:
            return True
    marker = getattr(type(layer), "process_local", None)
    if isinstance(marker, bool):
        return marker
    from channels.layers import InMemoryChannelLayer

    return isinstance(layer, InMemoryChannelLayer)
