"""SeaTunnel's SQL as sqlglot reads it: the lexical rules of the Sql transform's dialect.

SeaTunnel's Sql transform reads queries with H2-style lexical rules, which differ from
Spark SQL's in a few places that change meaning, not just spelling:

* string literals keep backslashes as written (``'\\d{4}'`` is a regex, not ``d{4}``);
  a quote inside a literal is written twice (``'it''s'``);
* "double quotes" name fields (in Spark they are string literals);
* ``TRIM(string, characters)`` names the string first;
* type names ``BYTES``, ``LONG`` and ``BYTE`` in ``CAST``, and ``CONVERT(value AS type)``.

Everything else is Spark SQL, so the dialect derives from sqlglot's Spark dialect. Function
calls are parsed by name only (no sqlglot function semantics): ``seatide.sql.functions`` decides
what each SeaTunnel function means, and the tree is written back as Spark SQL.

This module imports sqlglot; import it only where a Sql transform is in the job, so jobs
without one never pay for the parser.
"""

from __future__ import annotations

from sqlglot import ParseError, TokenError, exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType


class SqlSyntaxError(ValueError):
    """The query cannot be read as SeaTunnel SQL; the message says where."""


class SeaTunnel(Spark):
    class Tokenizer(Spark.Tokenizer):
        QUOTES = ["'"]
        STRING_ESCAPES = ["'"]
        IDENTIFIERS = ['"', "`"]
        KEYWORDS = {
            **Spark.Tokenizer.KEYWORDS,
            "BYTES": TokenType.VARBINARY,
            "LONG": TokenType.BIGINT,
            "BYTE": TokenType.TINYINT,
        }

    class Parser(Spark.Parser):
        # Every call by name stays an exp.Anonymous: its meaning is SeaTunnel's, decided in
        # seatide.sql.functions, not sqlglot's idea of what a same-named function does elsewhere.
        FUNCTIONS: dict = {}
        TRIM_PATTERN_FIRST = False
        FUNCTION_PARSERS = {
            **Spark.Parser.FUNCTION_PARSERS,
            "CONVERT": lambda self: self._parse_cast(False),
        }


def parse_query(text: str) -> exp.Expression:
    """Read one SeaTunnel query into a sqlglot tree, or raise SqlSyntaxError saying where."""
    quote = _unclosed_quote(text)
    if quote:
        raise SqlSyntaxError(quote)
    try:
        statements = [s for s in SeaTunnel().parse(text) if s is not None]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" at line {first.get('line')}, column {first.get('col')}" if first else ""
        what = first.get("description") or str(exc).splitlines()[0]
        raise SqlSyntaxError(f"{what}{where} (near '{first.get('highlight', '')}')") from None
    except TokenError as exc:
        raise SqlSyntaxError(str(exc)) from None
    if len(statements) != 1:
        raise SqlSyntaxError(f"the query holds {len(statements)} statements; write one SELECT")
    return statements[0]


def to_spark(tree: exp.Expression) -> str:
    return tree.sql(dialect="spark")


def _unclosed_quote(text: str) -> str | None:
    """Where a quote or comment opens and never closes (sqlglot only says 'cannot tokenize')."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return "a /* comment is never closed with */"
            i = end + 2
        elif ch in "'\"`":
            end = text.find(ch, i + 1)
            while end >= 0 and text.startswith(ch * 2, end):   # a doubled quote is one quote
                end = text.find(ch, end + 2)
            if end < 0:
                return f"a {ch} quote opened at character {i + 1} is never closed"
            i = end + 1
        else:
            i += 1
    return None


__all__ = ["SeaTunnel", "SqlSyntaxError", "parse_query", "to_spark"]
