"""The HTTP servers' side of the status page: WSGI's and ASGI's types, and how a request's
path, headers and body are read from each (:class:`~cronlease.web.app.StatusPage`'s
``wsgi`` and ``asgi`` turn them into the arguments of its ``respond``: one path for both).

Header names are lower-case; the body is read only for an action, at most one byte
past the largest form.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from cronlease.web.actions import MAX_FORM

__all__ = [
    "ASGIReceive",
    "ASGIScope",
    "ASGISend",
    "StartResponse",
    "WSGIEnviron",
    "asgi_headers",
    "asgi_lifespan",
    "asgi_path",
    "receive_body",
    "wsgi_body",
    "wsgi_headers",
    "wsgi_text",
]

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]
ASGIScope = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[MutableMapping[str, Any]]]
ASGISend = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def wsgi_headers(environ: WSGIEnviron) -> dict[str, str]:
    headers = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    return headers


def wsgi_text(value: str) -> str:
    """A WSGI path as text: PEP 3333 hands its bytes over as latin-1 characters."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def wsgi_body(environ: WSGIEnviron) -> bytes | None:
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


async def asgi_lifespan(receive: ASGIReceive, send: ASGISend) -> None:
    """Answer a lifespan scope until its shutdown."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def asgi_path(scope: ASGIScope) -> tuple[str, str]:
    """The path relative to the mount point, and the mount point."""
    root = str(scope.get("root_path", "")).rstrip("/")
    path = str(scope.get("path", ""))
    # mounted: Starlette keeps the prefix in path (a whole segment: "/ops" is not "/opsx")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return path, root


def asgi_headers(scope: ASGIScope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        name, text = bytes(key).decode("latin-1").lower(), bytes(value).decode("latin-1")
        # (HTTP/2 may split cookies over several headers: RFC 9113 §8.2.3)
        sep = "; " if name == "cookie" else ", "
        headers[name] = f"{headers[name]}{sep}{text}" if name in headers else text
    return headers


async def receive_body(receive: ASGIReceive) -> bytes:
    body = b""
    while len(body) <= MAX_FORM:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            break
    return body
