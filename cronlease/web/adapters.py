"""A :class:`~cronlease.web.app.StatusPage` as a WSGI and as an ASGI application.

Both turn the server's request into the arguments of ``StatusPage.respond`` (header
names lower-case, the body read only for an action, at most one byte past the
largest form) and its answer into the server's response: one path for both.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any, Protocol

from cronlease.web.actions import MAX_FORM
from cronlease.web.responses import REASONS, Response

__all__ = ["ASGIReceive", "ASGIScope", "ASGISend", "StartResponse", "WSGIEnviron", "asgi", "wsgi"]

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]
ASGIScope = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[MutableMapping[str, Any]]]
ASGISend = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class StatusPage(Protocol):
    """What the adapters call (:class:`cronlease.web.app.StatusPage`)."""

    @property
    def actions(self) -> bool: ...

    def respond(
        self,
        method: str,
        path: str,
        query: str,
        base: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = b"",
        client: str | None = None,
        secure: bool = False,
        raw: Mapping[str, Any] | None = None,
    ) -> Response: ...


def wsgi(page: StatusPage, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    headers = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    code, response_headers, body = page.respond(
        method,
        str(environ.get("PATH_INFO", "")),
        str(environ.get("QUERY_STRING", "")),
        _wsgi_text(str(environ.get("SCRIPT_NAME", ""))).rstrip("/"),
        headers=headers,
        body=_read_body(environ) if method == "POST" and page.actions else b"",
        client=environ.get("REMOTE_ADDR"),
        secure=environ.get("wsgi.url_scheme") == "https",
        raw=environ,
    )
    start_response(f"{code} {REASONS[code]}", response_headers)
    return [body]


def _wsgi_text(value: str) -> str:
    """A WSGI path as text: PEP 3333 hands its bytes over as latin-1 characters."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def _read_body(environ: WSGIEnviron) -> bytes | None:
    """The body, None without a length: a WSGI server may not read past the length it
    was given, so a chunked body cannot be read here (the page answers 411)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
    stream = environ.get("wsgi.input")
    if stream is None or length <= 0:
        return b""
    return bytes(stream.read(min(length, MAX_FORM + 1)))


async def asgi(page: StatusPage, scope: ASGIScope, receive: ASGIReceive, send: ASGISend) -> None:
    if scope["type"] == "lifespan":  # served on its own, e.g. by uvicorn
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        raise RuntimeError(f"the cronlease status page serves HTTP only, not {scope['type']}")
    root = str(scope.get("root_path", "")).rstrip("/")
    path = str(scope.get("path", ""))
    # mounted: Starlette keeps the prefix in path (a whole segment: "/ops" is not "/opsx")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    method = str(scope.get("method", "GET")).upper()
    headers: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name, text = bytes(key).decode("latin-1").lower(), bytes(value).decode("latin-1")
        # (HTTP/2 may split cookies over several headers: RFC 9113 §8.2.3)
        sep = "; " if name == "cookie" else ", "
        headers[name] = f"{headers[name]}{sep}{text}" if name in headers else text
    client = scope.get("client")
    respond = functools.partial(
        page.respond,
        method,
        path,
        bytes(scope.get("query_string", b"")).decode("latin-1"),
        root,
        headers=headers,
        body=await _receive_body(receive) if method == "POST" and page.actions else b"",
        client=str(client[0]) if client else None,
        secure=scope.get("scheme") == "https",
        raw=scope,
    )
    # Database reads run in a worker thread: they never block the application's loop.
    code, response_headers, body = await asyncio.to_thread(respond)
    encoded = [(k.lower().encode(), v.encode("latin-1")) for k, v in response_headers]
    await send({"type": "http.response.start", "status": code, "headers": encoded})
    await send({"type": "http.response.body", "body": body})


async def _receive_body(receive: ASGIReceive) -> bytes:
    body = b""
    while len(body) <= MAX_FORM:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            break
    return body
