"""The client the official MCP conformance suite drives (``conformance client --command``),
built on treadle's public MCP API: ``MCPHTTPClient`` with ``auth=`` (the SDK's OAuth
providers) and an ``elicitation_handler``.

    python client.py SERVER_URL      # MCP_CONFORMANCE_SCENARIO names the scenario;
                                     # MCP_CONFORMANCE_CONTEXT carries its credentials (JSON)

The OAuth authorization-code scenarios run headless: the "browser" is an HTTP request to the
authorization URL whose redirect carries the code back, as a user's browser would.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from treadle.mcp import MCPHTTPClient

REDIRECT_URI = "http://localhost:3030/callback"
CIMD_URL = "https://conformance-test.local/client-metadata.json"


class MemoryTokens:
    """Tokens and the registered client, kept for this process (a ``TokenStorage``)."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class HeadlessBrowser:
    """Opens the authorization URL without a person: the server redirects to our callback
    URL at once, with the code and state in its query."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient() as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location", "")
        query = parse_qs(urlsplit(location).query)
        if "code" not in query:
            raise RuntimeError(f"no code in the authorization redirect ({response.status_code})")
        self.result = AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None, "the authorization URL was not opened"
        return self.result


async def authorization_server(url: str) -> str:
    """The authorization server the MCP server names (RFC 9728 protected resource
    metadata, path-suffixed first, then at the root)."""
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    async with httpx2.AsyncClient() as http:
        for where in (f"/.well-known/oauth-protected-resource{parts.path}", ""):
            response = await http.get(base + (where or "/.well-known/oauth-protected-resource"))
            if response.status_code == 200:
                return str(response.json()["authorization_servers"][0])
    raise RuntimeError("the server names no authorization server")


def id_jag_exchange(context: dict[str, Any]) -> Any:
    """An assertion provider for the SEP-990 flow: trade the IdP's ID token for an ID-JAG."""

    async def exchange(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient() as http:
            response = await http.post(
                context["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "subject_token": context["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "audience": audience,
                    "resource": resource,
                    "client_id": context["idp_client_id"],
                },
            )
        response.raise_for_status()
        return str(response.json()["access_token"])

    return exchange


async def oauth(scenario: str, url: str, context: dict[str, Any]) -> httpx2.Auth:
    """The SDK's OAuth provider a user would pick for this kind of server."""
    if scenario == "auth/client-credentials-basic":
        from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

        return ClientCredentialsOAuthProvider(
            url,
            MemoryTokens(),
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            issuer=await authorization_server(url),
        )
    if scenario == "auth/client-credentials-jwt":
        from mcp.client.auth.extensions.client_credentials import (
            PrivateKeyJWTOAuthProvider,
            SignedJWTParameters,
        )

        signer = SignedJWTParameters(
            issuer=context["client_id"],
            subject=context["client_id"],
            signing_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
        return PrivateKeyJWTOAuthProvider(
            url,
            MemoryTokens(),
            client_id=context["client_id"],
            assertion_provider=signer.create_assertion_provider(),
            issuer=await authorization_server(url),
        )
    if scenario == "auth/cross-app-access-complete-flow":
        from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

        return IdentityAssertionOAuthProvider(
            url,
            MemoryTokens(),
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            issuer=await authorization_server(url),
            assertion_provider=id_jag_exchange(context),
            token_endpoint_auth_method="client_secret_basic",
        )
    # the authorization code flow with PKCE: registered dynamically, by a metadata document
    # (CIMD) or beforehand (the context's client)
    storage = MemoryTokens()
    if "client_id" in context:
        storage.client = OAuthClientInformationFull(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            redirect_uris=[REDIRECT_URI],
            token_endpoint_auth_method="client_secret_basic",  # RFC 7591's default
        )
    browser = HeadlessBrowser()
    metadata = OAuthClientMetadata(
        client_name="treadle conformance client",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(
        url,
        metadata,
        storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        client_metadata_url=CIMD_URL,
    )


async def accept_with_defaults(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {}  # accept, filling in nothing: treadle adds the schema's defaults


async def main(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    auth = await oauth(scenario, url, context) if scenario.startswith("auth/") else None
    client = MCPHTTPClient(
        "conformance", url=url, auth=auth, elicitation_handler=accept_with_defaults
    )
    async with client:
        tools = await client.get_tools()
        print("tools:", [tool.remote_name for tool in tools])
        if scenario == "tools_call":
            result = await client.call_tool("add_numbers", {"a": 5, "b": 3})
        elif scenario == "elicitation-sep1034-client-defaults":
            result = await client.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            result = await client.call_tool("test_reconnection", {})
        elif scenario.startswith("auth/") and tools:
            result = await client.call_tool(tools[0].remote_name, {})
        else:
            return
        print("result:", result.text)
        if result.is_error:
            raise SystemExit(1)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
