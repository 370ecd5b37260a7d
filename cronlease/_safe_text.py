"""Foreign text made safe where it is shown: terminal controls escaped, secrets hidden.

Error texts, a command's output and driver messages come from elsewhere and
may hold anything. Two rules apply where such text **leaves the process** —
a terminal, a log line, the status page — never where it is stored (the
history keeps what was said):

- :func:`escape_controls`: C0 controls (but newline and tab where lines are
  kept), DEL, C1 controls, bidi controls and the Unicode line separators are
  written as ``\\x1b``, ``\\u202e``: ``\\e]0;title\\a`` cannot retitle a
  terminal, ``\\e[2J`` cannot clear it, a right-to-left override cannot make
  ``exe.txt`` of ``txt.exe``;
- :func:`redact_secrets`: a URL's password (``scheme://user:PASSWORD@host``,
  any length, found by the URL's syntax), ``password=...`` pairs (libpq
  connection strings, query strings), and every database password this
  process knows (:func:`remember_password`, at least
  :data:`MIN_SCRUBBED_PASSWORD` characters: a shorter one would replace
  ordinary words) both as it is and URL-encoded (``s3cr%40t%21x``, any
  mix, either case of hex digits), become ``***``.

Every record of the ``cronlease`` logger passes both (a filter installed
when this module is imported); the CLI's output streams and the status page
apply them too.
"""

from __future__ import annotations

import functools
import logging
import re
import threading

__all__ = [
    "MIN_SCRUBBED_PASSWORD",
    "escape_controls",
    "redact_secrets",
    "remember_password",
    "safe_text",
]

#: a known password shorter than this is hidden only where a URL or ``password=``
#: shows it: replaced everywhere, it would mangle ordinary words
MIN_SCRUBBED_PASSWORD = 4

_CONTROLS = (
    "\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\u2028\u2029"  # line and paragraph separators
    "\ud800-\udfff"  # lone surrogates: no UTF-8 terminal, log file or pipe can write them
)
# scheme://user:PASSWORD@ (the password runs to the authority's last "@")
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@]*:)([^\s/?#]*)(?=@)")
_KEY_PASSWORD = re.compile(
    r"""(?i)(\b(?:password|passwd)\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&;,'")]+)"""
)
_QUOTED_KEY_PASSWORD = re.compile(
    r"""(?i)(["'](?:password|passwd)["']\s*:\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
)

_remembered: dict[str, re.Pattern[str]] = {}
_remembered_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _controls(keep: str) -> re.Pattern[str]:
    kept = "".join(re.escape(char) for char in keep)
    return re.compile(f"(?![{kept}])[{_CONTROLS}]" if kept else f"[{_CONTROLS}]")


def _escaped(match: re.Match[str]) -> str:
    point = ord(match.group())
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"


def _unicode_escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_controls(text: str, keep: str = "\n\t", *, unicode_escapes: bool = False) -> str:
    """``text`` with every control character but those in ``keep`` written as an escape:
    ``\\x1b``, ``\\u202e`` (with ``unicode_escapes``, always ``\\u001b``: TOML's form)."""
    return _controls(keep).sub(_unicode_escaped if unicode_escapes else _escaped, text)


def _password_pattern(password: str) -> re.Pattern[str]:
    """``password`` as it is or URL-encoded, character by character, in any mix."""
    parts = []
    for char in password:
        forms = [re.escape(char)]
        encoded = "".join(
            f"%{_hex_digit(byte >> 4)}{_hex_digit(byte & 15)}" for byte in char.encode("utf-8")
        )
        forms.append(encoded)
        if char == " ":
            forms.append(r"\+")
        parts.append(f"(?:{'|'.join(forms)})")
    return re.compile("".join(parts))


def _hex_digit(value: int) -> str:
    digit = f"{value:X}"
    return f"[{digit}{digit.lower()}]" if digit.isalpha() else digit


def remember_password(password: str | None) -> None:
    """Hide ``password`` from every text this module makes safe, from now on."""
    if password is None or len(password) < MIN_SCRUBBED_PASSWORD:
        return
    with _remembered_lock:
        if password not in _remembered:
            _remembered[password] = _password_pattern(password)


def redact_secrets(text: str, password: str | None = None) -> str:
    """``text`` without URL passwords, ``password=`` values, ``password`` (if long enough)
    and the remembered passwords, in plain or URL-encoded form."""
    if "://" in text:
        text = _URL_PASSWORD.sub(r"\1***", text)
    lowered = text.lower()
    if "passw" in lowered:
        text = _KEY_PASSWORD.sub(r"\1***", text)
        text = _QUOTED_KEY_PASSWORD.sub(
            lambda found: f"{found[1]}{found[2][0]}***{found[2][0]}", text
        )
    patterns = list(_remembered.values())
    if password is not None and len(password) >= MIN_SCRUBBED_PASSWORD:
        patterns.append(_remembered.get(password) or _password_pattern(password))
    for pattern in patterns:
        text = pattern.sub("***", text)
    return text


def safe_text(text: str, keep: str = "\n\t") -> str:
    """Both rules: secrets redacted, then controls escaped."""
    return escape_controls(redact_secrets(text), keep)


class _SafeRecords(logging.Filter):
    """Makes every record of the ``cronlease`` logger safe, message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        safe = safe_text(message)
        if safe != message:
            record.msg, record.args = safe, None
        if record.exc_info and not record.exc_text:
            # the formatter uses exc_text when set: the traceback, made safe once
            record.exc_text = safe_text(_FORMATTER.formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = safe_text(record.stack_info)
        return True


_FORMATTER = logging.Formatter()
_LOGGER = logging.getLogger("cronlease")
if not any(isinstance(existing, _SafeRecords) for existing in _LOGGER.filters):
    _LOGGER.addFilter(_SafeRecords())
