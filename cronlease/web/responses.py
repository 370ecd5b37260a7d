"""The page's responses: the security headers every one carries, and how each is made."""

from __future__ import annotations

__all__ = ["CSP_ACTIONS", "CSP_READ_ONLY", "REASONS", "Response", "content", "plain", "security"]

Response = tuple[int, list[tuple[str, str]], bytes]

# No script may run on this page, whatever a value contains; no frames; no forms,
# unless the application enabled actions (then the page's own forms only).
CSP_READ_ONLY = (
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
CSP_ACTIONS = CSP_READ_ONLY.replace("form-action 'none'", "form-action 'self'")

REASONS = {
    200: "OK",
    303: "See Other",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    503: "Service Unavailable",
}


def security(actions: bool) -> list[tuple[str, str]]:
    return [
        ("Content-Security-Policy", CSP_ACTIONS if actions else CSP_READ_ONLY),
        ("X-Content-Type-Options", "nosniff"),
        # not no-referrer: that makes browsers send "Origin: null" on the page's own
        # forms, which is what any page with that policy sends too (actions.py)
        ("Referrer-Policy", "same-origin"),
        ("Cache-Control", "no-store"),
    ]


def content(
    method: str, code: int, body: bytes, content_type: str, headers: list[tuple[str, str]]
) -> Response:
    """A body with its type and length (none sent for HEAD, the length kept)."""
    return (
        code,
        [("Content-Type", content_type), ("Content-Length", str(len(body))), *headers],
        b"" if method == "HEAD" else body,
    )


def plain(code: int, text: str, *, allow: str | None = None, actions: bool = False) -> Response:
    extra = [] if allow is None else [("Allow", allow)]
    body = (text + "\n").encode()
    return content("GET", code, body, "text/plain; charset=utf-8", [*security(actions), *extra])
