"""Spark type DDL (``decimal(15,2)``, ``array<struct<label: string, score: double>>``) read in
Python. A run's record and a UDF's declaration write types as DDL; reading them through Spark's
parser costs a JVM, which a question answered in process does not otherwise start. The types
columns and reasons have are read here; any other text (a schema, ``varchar(10)``, a field's
``NOT NULL`` or ``COMMENT``) goes to Spark's parser."""

from __future__ import annotations

import functools
import re

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    _parse_datatype_string,
)

_ATOMIC: dict[str, DataType] = {
    "string": StringType(), "boolean": BooleanType(), "tinyint": ByteType(), "byte": ByteType(),
    "smallint": ShortType(), "short": ShortType(), "int": IntegerType(), "integer": IntegerType(),
    "bigint": LongType(), "long": LongType(), "float": FloatType(), "real": FloatType(),
    "double": DoubleType(), "date": DateType(), "timestamp": TimestampType(),
    "timestamp_ltz": TimestampType(), "timestamp_ntz": TimestampNTZType(), "binary": BinaryType(),
    "void": NullType(), "null": NullType(),
}  # fmt: skip
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


class _NotRead(Exception):
    """DDL this module does not read: Spark's parser does."""


@functools.lru_cache(maxsize=1024)
def parse_type(ddl: str) -> DataType:
    """The Spark DataType ``ddl`` names, read in Python where it can be (with no JVM), else by
    the active Spark session's parser."""
    try:
        tokens = _tokens(ddl)
        found = _Reader(tokens).whole()
    except _NotRead:
        return _parse_datatype_string(ddl)
    return found


def _tokens(ddl: str) -> list[str]:
    tokens, at = [], 0
    while at < len(ddl):
        m = _TOKEN.match(ddl, at)
        if m is None:
            if ddl[at:].strip():
                raise _NotRead(ddl)
            break
        tokens.append(m[1])
        at = m.end()
    return tokens


class _Reader:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def whole(self) -> DataType:
        found = self.type()
        if self.at != len(self.tokens):
            raise _NotRead("text after the type")
        return found

    def take(self, expected: str | None = None) -> str:
        if self.at >= len(self.tokens):
            raise _NotRead("the type ends early")
        token = self.tokens[self.at]
        if expected is not None and token != expected:
            raise _NotRead(f"{expected!r} expected")
        self.at += 1
        return token

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def type(self) -> DataType:
        name = self.take().lower()
        if name in _ATOMIC:
            return _ATOMIC[name]
        if name in ("decimal", "dec", "numeric"):
            if self.peek() != "(":
                return DecimalType(10, 0)
            self.take("(")
            precision = int(self.take())
            scale = 0
            if self.peek() == ",":
                self.take(",")
                scale = int(self.take())
            self.take(")")
            return DecimalType(precision, scale)
        if name == "array":
            self.take("<")
            element = self.type()
            self.take(">")
            return ArrayType(element, True)
        if name == "map":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return MapType(key, value, True)
        if name == "struct":
            return self.struct()
        raise _NotRead(name)

    def struct(self) -> StructType:
        self.take("<")
        fields: list[StructField] = []
        while self.peek() != ">":
            if fields:
                self.take(",")
            name = self.take()
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            if self.peek() == ":":
                self.take(":")
            fields.append(StructField(name, self.type(), True))
        self.take(">")
        return StructType(fields)
