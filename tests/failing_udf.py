"""A reasoning UDF that raises on one input value (workers import it by module path)."""

from __future__ import annotations

from reasoning_udfs.udf import ReasoningUDF


class Fragile(ReasoningUDF):
    name = "fragile"
    value_type = "int"
    reason_type = "struct<note: string>"

    def main(self, x: int) -> int:
        return self.main_with_reason(x)[0]

    def main_with_reason(self, x: int) -> tuple[int, dict[str, str]]:
        if x == 13:
            raise ValueError("unlucky input")
        return x * 2, {"note": "doubled"}


fragile = Fragile()
