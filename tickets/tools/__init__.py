"""The executor's tools: what a worker session may do, scoped to its one assignment.

One module of tool logic (`service`) serves two doors that cannot diverge: the REST
endpoints under /api/v1/tools/ (`rest`, used by the `amux` command on the worker's PATH)
and the MCP server at /mcp (`mcp_server`). Both authenticate only with the assignment's
bearer token.
"""

from tickets.tools.worker_bin import (
    install_worker_bin,
    mcp_server_config,
    mcp_server_entry,
    worker_env,
)

__all__ = ["install_worker_bin", "mcp_server_config", "mcp_server_entry", "worker_env"]
