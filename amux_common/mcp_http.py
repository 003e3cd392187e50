"""What amux's MCP servers share on the wire: the bearer token, the JSON refusal answered
before the MCP machinery reads a request, and one way to serve an MCP server over
streamable HTTP (stateless, JSON responses: any web process answers any request)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

PATH = "/mcp"


def bearer(headers: Mapping[str, str] | None) -> str | None:
    value = (headers or {}).get("authorization", "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def scope_headers(scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def refuse(send, status: int, code: str, message: str, fields: dict | None = None,
                 realm: str = "amux") -> None:
    body = json.dumps({"error": {"code": code, "message": message,
                                 "fields": fields or {}}}).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", f'Bearer realm="{realm}"'.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(server: MCPServer):
    """The server's streamable HTTP app at ``PATH``; its session manager must be running
    (``server.session_manager.run()``) while it serves."""
    return server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        # Every request carries a secret bearer token, which a DNS-rebinding page cannot
        # know; amux's own ALLOWED_HOSTS guard the rest of the site.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def close_arguments(server: MCPServer) -> MCPServer:
    """Every tool of ``server`` refuses an argument it does not declare (the API's rule: a
    typo is an error naming it, never a silently dropped argument), and its published
    input schema says so (``additionalProperties: false``). Every faulty argument is named
    at once, in the API's words (``reasn: unknown field; reason: required``). The SDK
    builds each tool's argument model with pydantic's default, which ignores extras; it
    offers no option, so the built models are replaced here, once, after the tools are
    registered."""
    from pydantic import ConfigDict

    for tool in server._tool_manager.list_tools():  # noqa: SLF001 - no public way
        loose = tool.fn_metadata.arg_model
        strict = type(loose.__name__, (loose,), {
            "model_config": ConfigDict(**loose.model_config, extra="forbid"),
            "model_validate": classmethod(_validate_naming_every_fault(loose)),
            "__module__": loose.__module__})
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)
    return server


# pydantic's words for the faults the API names otherwise
_WORDS = {"extra_forbidden": "unknown field", "missing": "required"}


def _validate_naming_every_fault(loose):
    """The SDK reports a ValidationError's text to the caller: rebuilt with one line per
    argument (``name: what is wrong``), no input echoed back, no links to pydantic's docs."""
    from pydantic import ValidationError
    from pydantic_core import PydanticCustomError

    def validate(cls, obj, **kwargs):
        try:
            return loose.model_validate.__func__(cls, obj, **kwargs)
        except ValidationError as exc:
            lines = [{"type": PydanticCustomError(
                          "invalid_argument",
                          _WORDS.get(e["type"], e["msg"]).replace("{", "(").replace("}", ")")),
                      "loc": e["loc"], "input": None} for e in exc.errors()]
            raise ValidationError.from_exception_data(
                f"{cls.__name__.removesuffix('Arguments')} arguments", lines,
                hide_input=True) from None

    return validate
