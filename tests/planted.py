"""What an attacker plants in a weights file: a pickle whose loading runs code (it creates
``marker``), so a test sees whether anything unpickled it."""

from __future__ import annotations


class Planted:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.marker, "w"))
