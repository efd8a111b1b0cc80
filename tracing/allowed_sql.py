"""SQL text that reaches Spark from outside the code: a person's row predicate (``where=``,
``--where``) and the expressions of a run's record. Both are parsed by Spark's own parser and
checked before Spark analyses them, so neither can call ``reflect()``/``java_method()`` or read
a file through a subquery.

- A predicate is Spark SQL over the answer's columns and nothing more: an allow-list of
  expression classes and built-in functions.
- A record's expressions (written by this engine, but read back from files anyone may edit)
  may use what a task may: any function Spark or the session registers, except the ones that
  call Java by reflection, and no subquery (the parser decorrelates every one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields, is_dataclass
from typing import Any

from pyspark.errors import ParseException
from pyspark.sql import SparkSession

from materialization.catalog import StoreError
from materialization.duck_expressions import NotInProcess, NotInQuestions, output_predicate
from materialization.spark import SparkOf
from segmenter.errors import LineageError
from segmenter.operators import Col, Expr, Task, from_dict

# Catalyst's parsed expression classes a predicate may contain
NODES = frozenset(
    {
        "And", "Or", "Not", "EqualTo", "EqualNullSafe", "LessThan", "LessThanOrEqual", "GreaterThan",
        "GreaterThanOrEqual", "In", "IsNull", "IsNotNull", "Like", "ILike", "RLike", "Literal",
        "UnresolvedAttribute", "UnresolvedExtractValue", "CaseWhen", "Cast", "Add", "Subtract",
        "Multiply", "Divide", "IntegralDivide", "Remainder", "UnaryMinus", "UnaryPositive",
        "CreateNamedStruct",
    }
)  # fmt: skip

# built-in functions a predicate may call: string, number, date and collection functions
FUNCTIONS = frozenset(
    {
        "between", "lower", "upper", "lcase", "ucase", "trim", "ltrim", "rtrim", "length",
        "char_length", "character_length", "substring", "substr", "left", "right", "concat",
        "concat_ws", "startswith", "endswith", "contains", "instr", "locate", "replace", "abs",
        "round", "bround", "floor", "ceil", "ceiling", "sign", "greatest", "least", "coalesce",
        "nvl", "nvl2", "ifnull", "nullif", "if", "isnull", "isnotnull", "isnan", "year", "month",
        "day", "dayofmonth", "dayofweek", "quarter", "hour", "minute", "second", "date", "to_date",
        "to_timestamp", "date_add", "date_sub", "datediff", "array", "array_contains", "size",
        "cardinality", "element_at", "array_size", "struct", "named_struct",
    }
)  # fmt: skip

_SUBQUERIES = frozenset({"ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery"})

# functions that call any Java method, and those whose value is not a function of the row
# (which the parser refuses in a task: lineage is traced by recomputing): never in a record
REFLECTION = frozenset({"reflect", "java_method", "try_reflect"})
NONDETERMINISTIC = frozenset(
    {
        "input_file_name", "input_file_block_start", "input_file_block_length", "rand", "random",
        "randn", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id", "randstr",
        "uniform",
    }
)  # fmt: skip

# functions (and words before a parenthesis) of the SQL this engine writes that need no parse
_PLAIN = FUNCTIONS | {
    "sum", "count", "min", "max", "avg", "first", "last", "any_value", "stddev_samp", "stddev_pop",
    "var_samp", "var_pop", "variance", "collect_list", "collect_set", "cast", "in", "and", "or",
    "not", "case", "when", "then", "else", "end", "as", "is", "null", "like", "distinct",
    "interval", "timestamp", "true", "false", "raise_error", "array", "decimal", "int", "bigint",
    "string", "double", "boolean",
}  # fmt: skip
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# every way Spark SQL can write a subquery has one of these words
_QUERY_WORDS = frozenset({"select", "from", "values", "table", "with"})
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`")

# what a person's predicate may hold (a longer one is refused before any parser sees it:
# Spark's parser overflows its stack on 3,000 nested parentheses, a thread serving Arrow dies
# of 3,000 conjuncts, and a translator's recursion ends the process)
WHERE_CHARS = 20_000
WHERE_OPERATORS = 256  # AND and OR (a list of values is one IN)
WHERE_DEPTH = 64  # nested parentheses
TASK_CHARS = 1_000_000  # a SQL task's bounds: TPC-DS's largest statement has 10 k characters
TASK_OPERATORS = 1_000
TASK_DEPTH = 128
_BOOLEAN = re.compile(r"\b(?:and|or)\b", re.I)


def check_bounded(text: str, what: str, chars: int, operators: int, depth: int) -> None:
    """A one-line error where ``text`` is longer, has more AND/OR or nests parentheses
    deeper than the bounds (counted outside quoted strings)."""
    if len(text) > chars:
        raise LineageError(f"{what} has {len(text):,} characters (at most {chars:,})")
    bare = _QUOTED.sub("''", text)
    found = len(_BOOLEAN.findall(bare))
    if found > operators:
        raise LineageError(
            f"{what} has {found:,} AND/OR operators (at most {operators:,}): give a list of values as IN (…)"
        )
    level = deepest = 0
    for ch in bare:
        level += (ch == "(") - (ch == ")")
        deepest = max(deepest, level)
    if deepest > depth:
        raise LineageError(f"{what} nests parentheses {deepest:,} deep (at most {depth})")


def check_question(where: str, output: Sequence[Col], spark_of: SparkOf) -> None:
    """:func:`check_where` for a question about a run's ``output``, with no JVM where the
    in-process engine's allow-list takes the predicate (it is narrower: every part it
    evaluates is one a question may hold); Spark's parser judges the rest."""
    _check_text(where)
    try:
        output_predicate(where, output)
    except NotInQuestions as e:
        raise LineageError(_refusal(where, e.part)) from None
    except NotInProcess:
        check_where(spark_of(), where)


def _check_text(where: str) -> None:
    if not isinstance(where, str) or not where.strip():
        raise LineageError(f"invalid where={where!r}: give a SQL predicate over the output's columns")
    check_bounded(where, "where=", WHERE_CHARS, WHERE_OPERATORS, WHERE_DEPTH)


def check_where(spark: SparkSession, where: str) -> str:
    """``where`` if it is a predicate made of the allowed parts, else a one-line error naming
    the first part that is not."""
    _check_text(where)
    refused = _first_refused(_parse(spark, where, f"invalid where={where!r}"), _question_refuses)
    if refused:
        raise LineageError(_refusal(where, refused))
    return where


def _refusal(where: str, part: str) -> str:
    return (
        f"invalid where={where!r}: {part} is not allowed in a question (a predicate over "
        "the output's columns: comparisons, AND/OR/NOT, IN, LIKE, IS NULL, arithmetic, "
        "CASE, CAST and built-in string, number and date functions)"
    )


def stored_task(record: dict[str, Any], run_id: str, spark: Callable[[], SparkSession]) -> Task:
    """The task of run ``run_id``'s record if it is one this engine wrote and every expression
    in it is one a task may hold, else a one-line error naming the run and what is wrong. Text
    that calls only well-known functions and has no word a subquery needs is not parsed: a
    record of hundreds of expressions is checked in milliseconds, and ``spark`` (a session, made
    on demand: `al verify` starts no JVM for a record that needs none) is called only for the
    rest."""
    try:
        task = from_dict(record["task"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"the record of run {run_id!r} holds no task this engine wrote ({exc})") from None
    known: dict[str, bool] = {}

    def exists(name: str) -> bool:
        if name not in known:
            known[name] = bool(spark().catalog.functionExists(name))
        return known[name]

    for sql in sorted({e.sql for e in _expressions(task)}):
        text = _QUOTED.sub(" ", sql)
        calls = {w.lower() for w in _CALL.findall(text)}
        if calls <= _PLAIN and not {w.lower() for w in _WORD.findall(text)} & _QUERY_WORDS:
            continue
        context = f"the record of run {run_id!r} holds an expression Spark cannot parse"
        refused = _first_refused(_parse(spark(), sql, context), lambda n: _stored_refuses(n, exists))
        if refused:
            raise StoreError(
                f"the record of run {run_id!r} holds {refused}, which no task run by this engine "
                f"writes: edited or damaged ({sql[:120]})"
            )
    return task


def _parse(spark: SparkSession, sql: str, context: str) -> Any:
    try:
        return spark._jsparkSession.sessionState().sqlParser().parseExpression(sql)
    except ParseException as exc:
        raise LineageError(f"{context}: {str(exc).strip().splitlines()[0]}") from None


def _first_refused(parsed: Any, refuses: Callable[[Any], str | None]) -> str | None:
    pending = [parsed]
    while pending:
        node = pending.pop()
        refused = refuses(node)
        if refused:
            return refused
        children = node.children().iterator()
        while children.hasNext():
            pending.append(children.next())
    return None


def _question_refuses(node: Any) -> str | None:
    name = node.getClass().getSimpleName()
    if name == "UnresolvedFunction":
        function = str(node.nameParts().last()).lower()
        return None if function in FUNCTIONS and node.nameParts().size() == 1 else f"{function}()"
    if name in _SUBQUERIES:
        return "a subquery"
    return None if name in NODES else f"{node.prettyName()} ({name})"


def _stored_refuses(node: Any, exists: Callable[[str], bool]) -> str | None:
    name = node.getClass().getSimpleName()
    if name == "UnresolvedFunction":
        function = str(node.nameParts().last()).lower()
        plain = node.nameParts().size() == 1 and function not in REFLECTION | NONDETERMINISTIC
        return None if plain and exists(function) else f"a call of {function}()"
    return "a subquery" if name in _SUBQUERIES else None


def _expressions(value: Any) -> Iterator[Expr]:
    """Every expression in a task: its nodes' conditions, outputs, arguments and sort keys."""
    if isinstance(value, Expr):
        yield value
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from _expressions(getattr(value, f.name))
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _expressions(item)
