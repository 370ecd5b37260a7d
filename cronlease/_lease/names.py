"""Which characters a task name may hold, and its one stored form (docs/design.md §5.14).

A task name is compared byte for byte by every backend, so two names that
look the same must be the same string, or they become two tasks with two
leases, each running every tick:

- **one form**: names are stored in Unicode normalization form C, so a
  composed ``é`` (U+00E9) and a decomposed one (``e`` + U+0301, what macOS
  file names and some keyboards produce) are one task, and declaring both is
  "declared twice";
- **nothing invisible**: characters that draw nothing or reorder what is
  drawn would make names that look alike, or a name that shows as another in
  a terminal (a right-to-left override). Refused: control characters (Cc),
  format characters (Cf: bidi controls, zero-width space and joiners, soft
  hyphen, byte order mark, tags), line and paragraph separators (Zl, Zp),
  spaces other than U+0020 (Zs), surrogates (Cs: not UTF-8), private-use
  (Co) and unassigned (Cn) code points, and the default-ignorable characters
  of other categories (variation selectors, Hangul fillers, combining
  grapheme joiner, Mongolian free variation selectors).
"""

from __future__ import annotations

import unicodedata

__all__ = ["invisible_character", "normal_form", "quoted"]

_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
# Default_Ignorable_Code_Point characters outside the categories above (Unicode 15)
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong/jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xE0100, 0xE01EF),  # variation selectors supplement
)


def normal_form(name: str) -> str:
    """The stored form of ``name``: NFC."""
    return name if name.isascii() else unicodedata.normalize("NFC", name)


def quoted(name: str) -> str:
    """``repr(name)`` with every refused character escaped, for messages: repr already
    escapes all but the default-ignorable ones of visible categories."""
    text = repr(name)
    if text.isascii():
        return text
    return "".join(f"\\u{ord(char):04x}" if _ignorable(char) else char for char in text)


def _ignorable(char: str) -> bool:
    point = ord(char)
    return any(low <= point <= high for low, high in _IGNORABLE_RANGES)


def invisible_character(name: str) -> str | None:
    """A description of the first refused character in ``name`` ("U+200B ZERO WIDTH
    SPACE"), or None if it has none."""
    if name.isascii() and name.isprintable():
        return None  # the common name, cheaply (in ASCII only C0 controls and DEL are refused)
    for char in name:
        if char == " ":
            continue
        if unicodedata.category(char) in _REFUSED_CATEGORIES or _ignorable(char):
            label = unicodedata.name(char, "")
            return f"U+{ord(char):04X}" + (f" {label}" if label else "")
    return None
