"""Spark SQL expressions of an operator tree as DuckDB SQL, where DuckDB gives the same values.

The in-process engine may evaluate an expression only where DuckDB is known to agree with
Spark value for value. So this is an allow-list, not a translator of everything: every node
of the parsed expression must be one of a few kinds whose semantics match (comparisons,
boolean logic, ``IN``, ``IS NULL``, integer and decimal ``+ - *`` whose Spark result needs no
rounding, decimal ``/`` and ``avg`` (rounded by Spark's rules in a function registered on the
connection: :func:`spark_divide`), integer and decimal casts that do not round, ``CASE WHEN``, ``IF``
and ``coalesce`` over values of one type or of decimals Spark widens, ``raise_error`` (DuckDB's
``error``), ``concat``, ``abs``,
bitwise ``& | >>`` of integers, ``year``/``month`` of a date, a date plus or minus int days,
``round`` of a decimal, ``sum``/``count``/``min``/``max``),
with result types inferred as Spark infers them. Anything else raises :class:`NotInProcess`,
and the question is answered by Spark instead: never an approximation.
"""

from __future__ import annotations

import decimal
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import sqlglot
from duckdb import sqltypes
from sqlglot import exp

from segmenter.errors import LineageError
from segmenter.operators import Col, Expr

MAX_PRECISION = 38
INTEGERS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}  # digits as a decimal
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ)
_DATE_PARTS = (exp.Year, exp.Month, exp.Day)
_RANKING = (exp.RowNumber, exp.Rank, exp.DenseRank)
_EXACT_KEYS = {*INTEGERS, "string", "date", "boolean", "null"}  # grouped and ordered alike


class NotInProcess(Exception):
    """An expression (or input) DuckDB cannot evaluate exactly as Spark does."""


class NotInQuestions(NotInProcess):
    """A part of a person's predicate that no question may hold (``part``: as Spark's check
    names it)."""

    def __init__(self, part: str) -> None:
        super().__init__(f"{part} in a question")
        self.part = part


@dataclass(frozen=True)
class DecimalType:
    precision: int
    scale: int


_NULL_CASTS = {*INTEGERS, "string", "date", "boolean", "double", "float", "timestamp"}
SqlType = str | DecimalType  # a Spark type name ('int', 'string', 'date', ...) or a decimal


def spark_type(dtype: str) -> SqlType:
    """A column's Spark type (``Col.dtype``) as this module reasons about it."""
    found = _DECIMAL.fullmatch(dtype.replace(" ", ""))
    if found:
        return DecimalType(int(found[1]), int(found[2]))
    return "null" if dtype.lower() == "void" else dtype.lower()  # void: Spark's type of NULL


def to_duckdb(expr: Expr, types: dict[str, SqlType]) -> str:
    """``expr`` (Spark SQL over column ids) as DuckDB SQL; :class:`NotInProcess` where the two
    could differ. ``types``: the Spark type of every column id the expression may read."""
    return typed_duckdb(expr, types)[0]


def output_predicate(where: str, output: Sequence[Col]) -> str:
    """A question's ``where`` (Spark SQL over the output columns' names) as DuckDB SQL over
    the same names; :class:`NotInProcess` where DuckDB might judge a row otherwise, where
    two output columns share a name, or where the predicate holds a part a question may not
    (Spark's check then names it). A name that is no output column is a one-line error
    naming the output's columns, with no JVM asked."""
    named = {c.name: c for c in output}
    if len(named) < len(output):
        raise NotInProcess("two output columns share a name")
    _question_parts(where, tuple(named))
    return to_duckdb(Expr(where), {name: spark_type(c.dtype) for name, c in named.items()})


# what the translation evaluates for a task's expressions but a person's predicate may not hold
_NOT_IN_QUESTIONS = (exp.Lambda, exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseRightShift)


@functools.lru_cache(maxsize=1024)
def _question_parts(where: str, names: tuple[str, ...]) -> None:
    """Checked once per predicate and output: a question checks its ``where`` before it asks
    and the in-process engine translates it again (a refusal raises, and is not kept)."""
    try:
        tree = sqlglot.parse_one(_as_sqlglot_reads_spark(where), read="spark")
    except sqlglot.errors.ParseError as e:
        raise NotInProcess(f"cannot parse {where!r}") from e
    if tree.find(exp.Select):
        raise NotInQuestions("a subquery")
    known = {n.casefold() for n in names}  # Spark resolves names case-insensitively
    for node in tree.walk():
        if isinstance(node, exp.AggFunc):
            raise NotInQuestions(f"{node.sql_name().lower()}()")
        if isinstance(node, exp.Window):
            raise NotInQuestions("a window function")
        if isinstance(node, _NOT_IN_QUESTIONS) or _is_raise_error(node):
            raise NotInProcess(f"{node.key} in a question")
        if isinstance(node, exp.Column):
            if node.table:  # a struct's field, or a qualifier Spark resolves its own way
                raise NotInProcess(f"qualified name {node.sql(dialect='spark')}")
            if node.name.casefold() not in known:
                raise LineageError(
                    f"invalid where={where!r}: no output column is named {node.name!r} "
                    f"(the output's columns: {', '.join(names)})"
                )


def typed_duckdb(expr: Expr, types: dict[str, SqlType]) -> tuple[str, str]:
    """:func:`to_duckdb` and the Spark type (DDL) of the expression's values."""
    mentioned = tuple(sorted((c, t) for c, t in types.items() if c in expr.sql))  # a superset of those read
    return _typed(expr.sql, mentioned)


@functools.lru_cache(maxsize=4096)
def _typed(sql: str, types: tuple[tuple[str, SqlType], ...]) -> tuple[str, str]:
    """Translated once per process (sqlglot's parse and check were a fifth of a one-row
    question: every question checks and compiles the same expressions again)."""
    try:
        tree = sqlglot.parse_one(_as_sqlglot_reads_spark(sql), read="spark")
    except sqlglot.errors.ParseError as e:
        raise NotInProcess(f"cannot parse {sql!r}") from e
    holder = exp.Paren(this=tree)  # the checker rewrites some nodes in place, the top one too
    found = _Checker(dict(types)).type_of(holder)
    exact = holder.this.transform(
        lambda n: exp.Cast(this=n.this, to=n.to) if isinstance(n, exp.TryCast) else n
    )
    ddl = f"decimal({found.precision},{found.scale})" if isinstance(found, DecimalType) else found
    return exact.sql("duckdb", identify=True), ddl


_ESCAPE = re.compile(r"\\(?:['\"\\nt]|u[0-9a-fA-F]{4})")  # read alike by Spark and sqlglot


def _as_sqlglot_reads_spark(sql: str) -> str:
    """``sql`` with its quoted strings in a form sqlglot reads as Spark does: a doubled quote
    inside a literal (``'a''b'``: Spark's ``a'b``, sqlglot's ``'a' || 'b'``) as a backslash
    escape. Any other backslash escape than ``\\' \\" \\\\ \\n \\t \\uXXXX`` is
    :class:`NotInProcess` (Spark reads ``\\%``, ``\\_`` and octal escapes its own way)."""
    out: list[str] = []
    quote = None  # the quote of the literal or identifier being read
    i = 0
    while i < len(sql):
        ch = sql[i]
        if quote is None:
            quote = ch if ch in "'\"`" else None
        elif ch == "\\" and quote != "`":
            found = _ESCAPE.match(sql, i)
            if found is None:
                raise NotInProcess(f"a string escape Spark reads its own way in {sql!r}")
            out.append(found.group())
            i = found.end()
            continue
        elif ch == quote:
            if sql.startswith(quote, i + 1):  # doubled: the quote itself
                out.append(quote + quote if quote == "`" else "\\" + quote)
                i += 2
                continue
            quote = None
        out.append(ch)
        i += 1
    return "".join(out)


def _values(node: exp.Expression) -> list[exp.Expression]:
    """A CASE's, IF's or COALESCE's values as they stand now (typing rewrites some in place)."""
    if isinstance(node, exp.Coalesce):
        return [node.this, *node.expressions]
    if isinstance(node, exp.If):
        return [v for v in (node.args["true"], node.args.get("false")) if v is not None]
    default = node.args.get("default")
    return [b.args["true"] for b in node.args["ifs"]] + ([default] if default else [])


def _is_raise_error(node: exp.Expression) -> bool:
    """``raise_error('…')`` with a literal message: DuckDB's ``error('…')`` fails the same way."""
    return (
        isinstance(node, exp.Anonymous)
        and node.name.lower() == "raise_error"
        and len(node.expressions) == 1
        and isinstance(node.expressions[0], exp.Literal)
        and node.expressions[0].is_string
    )


def _operand(node: exp.Expression, t: SqlType) -> DecimalType:
    """An operand of decimal arithmetic as a decimal: an integer literal as the fewest
    digits that hold it (Spark's DecimalType.fromLiteral), other integers by their type."""
    if isinstance(node, exp.Literal) and _is_integer(t):
        return DecimalType(len(node.this.lstrip("0")) or 1, 0)
    return _as_decimal(t)


def _ddl(t: DecimalType) -> str:
    return f"DECIMAL({t.precision}, {t.scale})"


def _bounded(precision: int, scale: int) -> DecimalType:
    """Spark's result type of a decimal operation that may need more than 38 digits: the
    integer digits are kept and the scale is cut, to no less than 6 (allowPrecisionLoss)."""
    if precision <= MAX_PRECISION:
        return DecimalType(precision, scale)
    digits = precision - scale
    return DecimalType(MAX_PRECISION, max(MAX_PRECISION - digits, min(scale, 6)))


def _divided(a: exp.Expression, b: exp.Expression, scale: int, result: DecimalType) -> exp.Expression:
    """DuckDB SQL for Spark's ``a / b`` at ``scale``, rounded to ``result``."""
    return _exactly(SPARK_DIVIDE, a, b, result, scale)


def _exactly(
    function: str, a: exp.Expression, b: exp.Expression, result: DecimalType, *scales: int
) -> exp.Expression:
    """DuckDB SQL calling ``function`` (Python's exact decimals) on ``a`` and ``b`` as text,
    its result of type ``result`` read back from its exact decimal text, so DuckDB reads it
    without a rounding of its own."""
    as_text = [exp.Cast(this=v, to=exp.DataType.build("VARCHAR")) for v in (a, b)]
    numbers = [exp.Literal.number(n) for n in (*scales, result.scale)]
    call = exp.Anonymous(this=function, expressions=[*as_text, *numbers])
    return exp.Cast(this=call, to=exp.DataType.build(_ddl(result)))


SPARK_DIVIDE = "al_spark_divide"
SPARK_MULTIPLY = "al_spark_multiply"
_CONTEXT = decimal.Context(prec=MAX_PRECISION, rounding=decimal.ROUND_HALF_UP)
_WIDE = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP)


def spark_divide(a: str | None, b: str | None, scale: int, result_scale: int) -> str | None:
    """``a / b`` as Spark's Decimal computes it: Java's BigDecimal.divide to 38 significant
    digits (HALF_UP), set to the division's ``scale`` (HALF_UP), then to ``result_scale``
    (HALF_UP, where a cast follows). None for a zero divisor (as Spark's non-ANSI NULL: a
    value a task computed never divided by zero)."""
    if a is None or b is None or decimal.Decimal(b).is_zero():
        return None
    divisor = decimal.Decimal(b)
    quotient = _CONTEXT.divide(decimal.Decimal(a), divisor)
    for step in (scale, result_scale):
        quotient = quotient.quantize(decimal.Decimal(1).scaleb(-step), context=_WIDE)
    return format(quotient, "f")


def spark_multiply(a: str | None, b: str | None, result_scale: int) -> str | None:
    """``a * b`` where its exact type needs more than 38 digits: Spark's exact product set to
    the cut ``result_scale`` (HALF_UP); a product too large for 38 digits fails the task in
    Spark (ANSI), so no value a task computed needs it."""
    if a is None or b is None:
        return None
    product = _WIDE.multiply(decimal.Decimal(a), decimal.Decimal(b))
    return format(product.quantize(decimal.Decimal(1).scaleb(-result_scale), context=_WIDE), "f")


def register_functions(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con`` with the functions the translated expressions call."""
    text, whole = sqltypes.VARCHAR, sqltypes.INTEGER
    for name, function, args in (
        (SPARK_DIVIDE, spark_divide, [text, text, whole, whole]),
        (SPARK_MULTIPLY, spark_multiply, [text, text, whole]),
    ):
        con.create_function(name, function, args, text, null_handling="special", side_effects=False)
    return con


def _is_integer(t: SqlType) -> bool:
    return isinstance(t, str) and t in INTEGERS


def _is_numeric(t: SqlType) -> bool:
    return _is_integer(t) or isinstance(t, DecimalType)


def _as_decimal(t: SqlType) -> DecimalType:
    return t if isinstance(t, DecimalType) else DecimalType(INTEGERS[t], 0)  # type: ignore[index]


class _Checker:
    def __init__(self, types: dict[str, SqlType]) -> None:
        self.types = types

    def type_of(self, node: exp.Expression) -> SqlType:
        """Spark's result type of ``node``; raises where DuckDB could give another value."""
        if isinstance(node, exp.Paren):
            return self.type_of(node.this)
        if isinstance(node, exp.Column):
            name = node.name
            if name not in self.types:
                raise NotInProcess(f"unknown column {name!r}")
            return self.types[name]
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Boolean):
            return "boolean"
        if isinstance(node, exp.Null):
            return "null"
        if isinstance(node, _COMPARISONS):
            self._comparable(self.type_of(node.this), self.type_of(node.expression), node)
            return "boolean"
        if isinstance(node, (exp.And, exp.Or)):
            self._boolean(node.this)
            self._boolean(node.expression)
            return "boolean"
        if isinstance(node, exp.Not):
            self._boolean(node.this)
            return "boolean"
        if isinstance(node, exp.Is):
            self.type_of(node.this)
            if not isinstance(node.expression, exp.Null):
                raise NotInProcess(f"IS {node.expression.sql()}")
            return "boolean"
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Between):
            left = self.type_of(node.this)
            self._comparable(left, self.type_of(node.args["low"]), node)
            self._comparable(left, self.type_of(node.args["high"]), node)
            return "boolean"
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            return self._arithmetic(node)
        if isinstance(node, exp.Div):
            return self._divide(node)
        if isinstance(node, (exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseRightShift)):
            return self._bitwise(node)
        if isinstance(node, exp.Concat):
            for part in node.expressions:  # DuckDB's || is NULL when a part is, as Spark's concat
                if self.type_of(part) not in ("string", "null"):
                    raise NotInProcess(f"concat of non-strings in {node.sql(dialect='spark')}")
            return "string"
        if isinstance(node, exp.Mod):
            return self._modulo(node)
        if isinstance(node, exp.Abs):
            inner = self.type_of(node.this)
            if not _is_numeric(inner):
                raise NotInProcess(f"abs of {inner}")
            return inner
        if isinstance(node, exp.Neg):
            inner = self.type_of(node.this)
            if not _is_numeric(inner):
                raise NotInProcess(f"-{inner}")
            return inner
        if isinstance(node, exp.Cast):  # CAST (read as TRY_CAST) or a DATE '...' literal
            return self._cast(node)
        if isinstance(node, _DATE_PARTS):
            inner = node.this.this if isinstance(node.this, exp.TsOrDsToDate) else node.this
            if self.type_of(inner) != "date":
                raise NotInProcess(f"{node.key} of a non-date")
            return "int"
        if isinstance(node, exp.TsOrDsAdd):
            return self._date_add(node)
        if isinstance(node, exp.Round):
            return self._round(node)
        if isinstance(node, exp.Substring):
            return self._substring(node)
        if isinstance(node, exp.Like):
            return self._like(node)
        if isinstance(node, (exp.Sum, exp.Count, exp.Min, exp.Max)):
            return self._aggregate(node)
        if isinstance(node, exp.Window):
            return self._window(node)
        if isinstance(node, exp.Avg):
            return self._average(node)
        if isinstance(node, exp.Case) and node.this is None:  # CASE WHEN c THEN v … END
            for branch in node.args["ifs"]:
                self._boolean(branch.this)
            return self._one_type(node)
        if isinstance(node, exp.If):  # IF(c, a, b): a pivot's pick, as CASE WHEN c THEN a ELSE b END
            self._boolean(node.this)
            return self._one_type(node)
        if isinstance(node, exp.Coalesce):
            return self._one_type(node)
        if _is_raise_error(node):  # a rewrite's check (a row_number() tie): fails alike
            node.replace(exp.Anonymous(this="error", expressions=[node.expressions[0].copy()]))
            return "null"
        raise NotInProcess(f"{node.key} ({node.sql(dialect='spark')}) is not evaluated in process")

    def _date_add(self, node: exp.TsOrDsAdd) -> SqlType:
        """``date_add(d, n)``/``date_sub(d, n)`` of a date and an integer (Spark's ``d + 5``) as
        DuckDB's ``d + n``, a date: sqlglot's ``+ INTERVAL n DAY`` would give a timestamp."""
        if node.text("unit").upper() not in ("", "DAY") or self.type_of(node.this) != "date":
            raise NotInProcess(f"{node.sql(dialect='spark')} of a non-date")
        if self.type_of(node.expression) not in ("tinyint", "smallint", "int"):
            raise NotInProcess(f"{node.sql(dialect='spark')}: days not an int")
        node.replace(exp.paren(exp.Add(this=node.this.copy(), expression=node.expression.copy())))
        return "date"

    def _round(self, node: exp.Round) -> SqlType:
        """``round`` of a decimal to a literal scale: HALF_UP, as DuckDB rounds a decimal (half
        away from zero), typed as Spark types it (one more integer digit, for the carry)."""
        x = self.type_of(node.this)
        places = node.args.get("decimals")
        literal = places is None or (isinstance(places, exp.Literal) and places.this.isdigit())
        if not (isinstance(x, DecimalType) and literal):
            raise NotInProcess(f"round of {x} in {node.sql(dialect='spark')}")
        scale = min(int(places.this) if places is not None else 0, x.scale)
        found = DecimalType(min(MAX_PRECISION, x.precision - x.scale + 1 + scale), scale)
        rounded = exp.Round(this=node.this.copy(), decimals=exp.Literal.number(scale))
        node.replace(exp.Cast(this=rounded, to=exp.DataType.build(_ddl(found))))
        return found

    def _substring(self, node: exp.Substring) -> SqlType:
        """``substring(s, pos, len)`` of a string at a positive literal position and a
        non-negative literal length: characters counted alike (code points), 1-based in
        both; a position of 0 or below counts otherwise (TPC-H Q22's country code)."""
        start, length = node.args.get("start"), node.args.get("length")
        literal = all(isinstance(a, exp.Literal) and a.this.isdigit() for a in (start, length))
        if self.type_of(node.this) != "string" or not literal or int(start.this) < 1:  # type: ignore[union-attr]
            raise NotInProcess(f"{node.sql(dialect='spark')}: not at literal positions from 1")
        return "string"

    def _one_type(self, node: exp.Expression) -> SqlType:
        """The type of a CASE or COALESCE whose values all have one type, or are decimals
        and integers that Spark widens to one decimal (each value is cast to it here, so
        DuckDB gives the same type); other mixes are widened by rules not reproduced here."""
        types = [self.type_of(v) for v in _values(node)]
        found = set(types) - {"null"}
        if len(found) <= 1:
            return found.pop() if found else "null"
        if not all(_is_numeric(t) for t in found) or not any(isinstance(t, DecimalType) for t in found):
            raise NotInProcess(f"values of types {sorted(map(str, found))} in {node.sql(dialect='spark')}")
        decimals = [_as_decimal(t) for t in found]
        scale = max(d.scale for d in decimals)
        wider = DecimalType(max(d.precision - d.scale for d in decimals) + scale, scale)
        if wider.precision > MAX_PRECISION:
            raise NotInProcess(f"decimal({wider.precision},{scale}) values in {node.sql(dialect='spark')}")
        for value, t in zip(_values(node), types, strict=True):  # as typing rewrote them
            if t != wider:
                value.replace(exp.Cast(this=value.copy(), to=exp.DataType.build(_ddl(wider))))
        return wider

    def _boolean(self, node: exp.Expression) -> None:
        if self.type_of(node) not in ("boolean", "null"):
            raise NotInProcess(f"{node.sql()} is not a boolean")

    @staticmethod
    def _literal(node: exp.Literal) -> SqlType:
        if node.is_string:
            return "string"
        text = node.this
        if re.fullmatch(r"\d+", text):
            return (
                "int" if int(text) < 2**31 else "bigint" if int(text) < 2**63 else DecimalType(len(text), 0)
            )
        if re.fullmatch(r"\d+\.\d+", text):
            whole, frac = text.split(".")
            return DecimalType(max(len(whole.lstrip("0")) + len(frac), len(frac), 1), len(frac))
        raise NotInProcess(f"numeric literal {text}")

    @staticmethod
    def _comparable(a: SqlType, b: SqlType, node: exp.Expression) -> None:
        if "null" in (a, b):
            return
        if (_is_numeric(a) and _is_numeric(b)) or (a == b and a in ("string", "date", "boolean")):
            return
        raise NotInProcess(f"comparison of {a} with {b} in {node.sql(dialect='spark')}")

    def _in(self, node: exp.In) -> SqlType:
        left = self.type_of(node.this)
        if node.args.get("query") is not None or not node.expressions:
            raise NotInProcess("IN over a subquery")
        for item in node.expressions:
            if not isinstance(item, (exp.Literal, exp.Null, exp.Boolean, exp.Cast, exp.Neg)):
                raise NotInProcess("IN over non-literals")
            self._comparable(left, self.type_of(item), node)
        return "boolean"

    def _arithmetic(self, node: exp.Expression) -> SqlType:
        a, b = self.type_of(node.this), self.type_of(node.expression)
        if not (_is_numeric(a) and _is_numeric(b)):
            raise NotInProcess(f"arithmetic on {a} and {b}")
        if _is_integer(a) and _is_integer(b):
            return a if INTEGERS[a] >= INTEGERS[b] else b  # type: ignore[index]
        x, y = _operand(node.this, a), _operand(node.expression, b)
        if isinstance(node, exp.Mul):
            precision, scale = x.precision + y.precision + 1, x.scale + y.scale
        else:
            scale = max(x.scale, y.scale)
            precision = max(x.precision - x.scale, y.precision - y.scale) + scale + 1
        if precision > MAX_PRECISION and isinstance(node, exp.Mul):  # Spark rounds it to fit
            found = _bounded(precision, scale)
            node.replace(_exactly(SPARK_MULTIPLY, node.this.copy(), node.expression.copy(), found))
            return found
        if precision > MAX_PRECISION:
            raise NotInProcess(f"decimal({precision},{scale}) result in {node.sql(dialect='spark')}")
        return DecimalType(precision, scale)

    def _divide(self, node: exp.Div) -> SqlType:
        """Decimal division, typed and rounded as Spark does it (:func:`spark_divide`, called
        from DuckDB); integer or floating division is not reproduced."""
        a, b = self.type_of(node.this), self.type_of(node.expression)
        decimals = isinstance(a, DecimalType) or isinstance(b, DecimalType)
        if not (decimals and _is_numeric(a) and _is_numeric(b)):
            raise NotInProcess(f"division of {a} by {b} in {node.sql(dialect='spark')}")
        x, y = _operand(node.this, a), _operand(node.expression, b)
        scale = max(6, x.scale + y.precision + 1)
        found = _bounded(x.precision - x.scale + y.scale + scale, scale)
        node.replace(_divided(node.this.copy(), node.expression.copy(), found.scale, found))
        return found

    def _average(self, node: exp.Avg) -> SqlType:
        """``avg`` of a decimal as Spark computes it (DecimalDivideWithOverflowCheck): its sum
        divided by its count to 38 significant digits, rounded to decimal(p + 4, s + 4)."""
        x = self.type_of(node.this)
        if not isinstance(x, DecimalType):
            raise NotInProcess(f"avg of {x} (Spark sums in floating point)")
        found = DecimalType(min(MAX_PRECISION, x.precision + 4), min(MAX_PRECISION, x.scale + 4))
        parts = exp.Sum(this=node.this.copy()), exp.Count(this=node.this.copy())
        node.replace(_divided(*parts, found.scale, found))
        return found

    def _bitwise(self, node: exp.Expression) -> SqlType:
        """``&``, ``|`` and ``>>`` by a literal of integers (Spark's grouping() reads
        ``spark_grouping_id`` so; ``<<`` overflows differently)."""
        a, b = self.type_of(node.this), self.type_of(node.expression)
        if not (_is_integer(a) and _is_integer(b)):
            raise NotInProcess(f"bitwise operation on {a} and {b}")
        if isinstance(node, exp.BitwiseRightShift):
            if not isinstance(node.expression, exp.Literal):
                raise NotInProcess(">> by other than a literal")
            return a
        return a if INTEGERS[a] >= INTEGERS[b] else b  # type: ignore[index]

    def _modulo(self, node: exp.Mod) -> SqlType:
        a = self.type_of(node.this)
        divisor = node.expression
        if not _is_integer(a) or not (isinstance(divisor, exp.Literal) and divisor.this.isdigit()):
            raise NotInProcess("% other than an integer by a positive integer literal")
        if int(divisor.this) == 0:
            raise NotInProcess("% by zero")
        return a

    def _cast(self, node: exp.Cast) -> SqlType:
        source = self.type_of(node.this)
        target = spark_type(node.to.sql(dialect="spark").lower())
        if source == target:
            return target
        if source == "null" and (isinstance(target, DecimalType) or target in _NULL_CASTS):
            return target  # the padding of an outer join: no value to convert
        if isinstance(node.this, exp.Literal) and isinstance(target, DecimalType):
            fits = re.fullmatch(r"(\d+)(?:\.(\d+))?", node.this.this)
            if fits:  # a literal that fits the decimal exactly (Spark writes 0.5BD so)
                whole, frac = fits[1].lstrip("0"), fits[2] or ""
                if len(frac) <= target.scale and len(whole) <= target.precision - target.scale:
                    return target
        if target == "date" and isinstance(node.this, exp.Literal) and _DATE.fullmatch(node.this.this):
            return target
        if _is_integer(source) and _is_integer(target):
            # narrowing too: DuckDB's CAST fails on overflow as ANSI Spark's does, and the
            # values a tracing query recomputes are values the task computed without failing
            return target
        if isinstance(target, DecimalType) and _is_numeric(source):
            # fewer integer digits fail on overflow in both (ANSI), as integers do; a smaller
            # scale rounds HALF_UP in Spark, half away from zero in DuckDB: the same (Spark's
            # precision-loss casts, TPC-H Q11's decimal(38,6) to decimal(38,4))
            return target
        raise NotInProcess(f"cast of {source} to {target}")

    def _like(self, node: exp.Like) -> SqlType:
        pattern = node.expression
        if self.type_of(node.this) != "string" or not isinstance(pattern, exp.Literal):
            raise NotInProcess("LIKE other than a string against a literal pattern")
        if "\\" in pattern.this:  # Spark's default escape character; DuckDB has none
            raise NotInProcess("LIKE pattern with an escape character")
        return "boolean"

    def _window(self, node: exp.Window) -> SqlType:
        """``f(…) OVER (PARTITION BY … ORDER BY … frame)`` over keys DuckDB groups and orders
        as Spark does (no floating point), ``f`` an aggregate on the allow-list or a ranking
        function (an INT in Spark, cast so: DuckDB's is a BIGINT)."""
        order = node.args.get("order")
        sorted_by = [o.this for o in order.expressions] if order else []
        keys = [*(node.args.get("partition_by") or []), *sorted_by]
        for key in keys:
            t = self.type_of(key)
            if not (isinstance(t, DecimalType) or t in _EXACT_KEYS):
                raise NotInProcess(f"a window over {t} values")
        if isinstance(node.this, _RANKING):
            node.replace(exp.Cast(this=node.copy(), to=exp.DataType.build("INT")))
            return "int"
        if not isinstance(node.this, (exp.Sum, exp.Count, exp.Min, exp.Max)):
            raise NotInProcess(f"window function {node.this.sql(dialect='spark')}")
        return self._aggregate(node.this)

    def _aggregate(self, node: exp.Expression) -> SqlType:
        arg = node.this
        if isinstance(arg, exp.Distinct):
            if not isinstance(node, exp.Count) or len(arg.expressions) != 1:
                raise NotInProcess("DISTINCT aggregate other than count of one column")
            arg = arg.expressions[0]
        if isinstance(node, exp.Count):
            if not isinstance(arg, exp.Star):
                self.type_of(arg)
            return "bigint"
        inner = self.type_of(arg)
        if isinstance(node, exp.Sum):
            if _is_integer(inner):
                return "bigint"
            if isinstance(inner, DecimalType):
                return DecimalType(min(MAX_PRECISION, inner.precision + 10), inner.scale)
            raise NotInProcess(f"sum of {inner}")
        if _is_numeric(inner) or inner in ("string", "date"):
            return inner
        raise NotInProcess(f"{node.key} of {inner}")
