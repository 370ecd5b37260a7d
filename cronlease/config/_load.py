"""Read a config file: bytes, UTF-8, TOML; then validate it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cronlease.config._spec import Config
from cronlease.config._validate import Validator
from cronlease.errors import ConfigFileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["DEFAULT_CONFIG", "load_config"]

#: the file the CLI reads when no ``--config`` is given
DEFAULT_CONFIG = "cronlease.toml"


def load_config(path: str | Path, *, import_calls: bool = True) -> Config:
    """Read, parse and validate ``path``; raise ``ConfigFileError`` for any problem.

    With ``import_calls`` every ``call`` is imported (with the config file's
    directory on ``sys.path``) and must name a callable; without it, the
    paths are only checked for their form, so tools such as ``status`` work
    where the application cannot be imported.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigFileError(path, f"cannot read the config file: {reason}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(path, exc) from None
    return Validator(path, text, import_calls).config(data)


def _syntax_error(path: Path, exc: tomllib.TOMLDecodeError) -> ConfigFileError:
    message = str(exc)
    line = None
    where = re.search(r"\(at line (\d+), column (\d+)\)", message)
    if where:
        line = int(where.group(1))
        message = message[: where.start()].rstrip()
    elif "(at end of document)" in message:
        message = message.replace("(at end of document)", "").rstrip() + " at the end of the file"
    twice = re.match(r"Cannot (?:declare|overwrite a value) \('tasks', '([^']*)'", message)
    if twice:
        return ConfigFileError(
            path, "this task name is declared twice", task=twice.group(1), line=line
        )
    return ConfigFileError(path, f"not valid TOML: {message}", line=line)
