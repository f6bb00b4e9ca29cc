"""Every start tag (with its attributes) and every text node of an HTML page, for the tests that check what a
report or diff page holds and that untrusted names stay escaped."""

from __future__ import annotations

from html.parser import HTMLParser


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


__all__ = ["TagCollector"]
