"""The MCP server (docs/mcp.md): agents search, list and read one user's conversations through
the official ``mcp`` SDK, over stdio (``manage.py mcp_server --owner``) or streamable HTTP
(``murmur_conversations.mcp.http``). An optional integration (``murmur-conversations[mcp]``):
nothing else in the package imports it, except the ``mcp_server`` command when it runs."""
