"""One escaping per output format for text that holds names from traces (ops, kernels, frames, regions) or sentences
that quote them: every writer of Markdown or XML goes through here; HTML goes through jinja2's autoescape.

- `one_line`: what every format starts from: line breaks (`\\n`, `\\r`, U+2028/U+2029, NEL), tabs and other control
  characters become a space, lone surrogates (a JSON `\\ud800`) and U+FFFE/U+FFFF become U+FFFD, cut at `limit`.
- `markdown_text`: `one_line`, then every ASCII punctuation character that Markdown or GitHub gives a meaning
  (headings, lists, quotes, fences, emphasis, links, images, HTML, entities, table pipes, math) backslash-escaped,
  `www.` and `scheme:` broken so that GitHub's autolinks do not fire, and an invisible word joiner (U+2060) after
  each `@`, which keeps an e-mail-like name from being linked (the e-mail autolink reads the text after escapes): a
  name renders as its own plain text in a paragraph or a table cell, never as a heading, link, image or second cell.
- `xml_text` / `xml_attr`: XML 1.0's forbidden characters (C0 controls but tab, newline and carriage return,
  surrogates, U+FFFE/U+FFFF) become U+FFFD, then `&`, `<`, `>` (and quotes in an attribute) are escaped, so the file
  stays well-formed whatever a trace names.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import escape, quoteattr

REPLACEMENT = "\ufffd"
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_UNENCODABLE = re.compile("[\ud800-\udfff\ufffe\uffff]")
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#+\-!|~&:=$^])")
WORD_JOINER = "\u2060"
_AUTOLINK_WWW = re.compile(r"(?i)(www)\.")
_LIST_NUMBER = re.compile(r"^(\d+)([.)])")


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def one_line(text: str, limit: int = 4096) -> str:
    """The text on one line, every character encodable, at most `limit` characters."""
    return cut(_UNENCODABLE.sub(REPLACEMENT, _BREAKS.sub(" ", text)), limit)


def markdown_text(text: str, limit: int = 4096) -> str:
    """Plain text inside a Markdown paragraph or table cell (GitHub Flavored Markdown)."""
    line = one_line(text, limit).strip(" ")
    line = _MARKDOWN_SPECIAL.sub(r"\\\1", line)
    line = _AUTOLINK_WWW.sub(r"\1\\.", line).replace("@", "@" + WORD_JOINER)
    return _LIST_NUMBER.sub(r"\1\\\2", line)


def markdown_shown(text: str, limit: int = 4096) -> str:
    """What a reader sees of `markdown_text(text, limit)` once rendered (for tests and for comparing)."""
    return one_line(text, limit).strip(" ").replace("@", "@" + WORD_JOINER)


def xml_clean(text: str) -> str:
    """The text with XML 1.0's forbidden characters replaced (tab, newline and carriage return kept)."""
    return _XML_FORBIDDEN.sub(REPLACEMENT, text)


def xml_text(text: str) -> str:
    """Character data of an XML element."""
    return escape(xml_clean(text))


def xml_attr(text: str) -> str:
    """A quoted XML attribute value (its line breaks kept as character references)."""
    return quoteattr(xml_clean(text))


_URL_UNSAFE = {"(": "%28", ")": "%29", "<": "%3C", ">": "%3E", "\\": "%5C", " ": "%20", "`": "%60", '"': "%22"}


def markdown_link(label: str, url: str) -> str:
    """`[label](url)`: the label as plain text, the URL on one line with the characters that could end or break
    the link percent-encoded."""
    target = "".join(_URL_UNSAFE.get(ch, ch) for ch in one_line(url, 2048).replace(" ", ""))
    return f"[{markdown_text(label, 200)}]({target})"
