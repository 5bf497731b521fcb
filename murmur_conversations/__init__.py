"""A durable, truthful, live record of AI agent conversations for Django.

What a host may import is the README's table "What a host may import"; every other module and name
is private to the app and may change in any release.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    #: The installed distribution's version (``murmur-conversations`` in pyproject.toml).
    __version__: str = version("murmur-conversations")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0.0.0+unknown"
