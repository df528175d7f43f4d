"""A small SQL tokenizer and the text-level rewrites the Sql transform needs.

The Sql transform changes a SeaTunnel query in a few precise places: string literals
(SeaTunnel keeps backslashes as written, Spark unescapes them), double-quoted names
(identifiers in SeaTunnel, strings in Spark), the table the query reads (a name unique
to this transform instance) and, for row kinds, the SELECT lists. Each rewrite works on
tokens, so nothing inside a literal or a comment is ever touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from seatide.plugin.rowkind import ROW_KIND_COLUMN


class SqlSyntaxError(ValueError):
    """The query text cannot be tokenized (an unclosed quote or parenthesis)."""


@dataclass(frozen=True)
class Token:
    kind: str   # ws, str, dstr, qid, ident, num, op
    text: str

    @property
    def upper(self) -> str:
        return self.text.upper()

    def is_word(self, *words: str) -> bool:
        return self.kind == "ident" and self.upper in words


_IDENT = re.compile(r"[^\W\d]\w*", re.UNICODE)
_NUMBER = re.compile(r"\d+(\.\d*)?([eE][+-]?\d+)?[a-zA-Z]*|\.\d+([eE][+-]?\d+)?[a-zA-Z]*")
_WS = re.compile(r"\s+")


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            end = _WS.match(text, i).end()
            tokens.append(Token("ws", text[i:end]))
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            tokens.append(Token("ws", text[i:end]))
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise SqlSyntaxError("a /* comment is never closed with */")
            end += 2
            tokens.append(Token("ws", text[i:end]))
        elif ch in "'\"`":
            end = _quoted_end(text, i)
            kind = {"'": "str", '"': "dstr", "`": "qid"}[ch]
            tokens.append(Token(kind, text[i:end]))
        elif _IDENT.match(text, i):
            end = _IDENT.match(text, i).end()
            tokens.append(Token("ident", text[i:end]))
        elif _NUMBER.match(text, i):
            end = _NUMBER.match(text, i).end()
            tokens.append(Token("num", text[i:end]))
        else:
            end = i + 1
            tokens.append(Token("op", ch))
        i = end
    _check_parens(tokens)
    return tokens


def _quoted_end(text: str, start: int) -> int:
    quote = text[start]
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "`":
            i += 2
            continue
        if ch == quote:
            if text.startswith(quote * 2, i):   # '' inside '...' is one quote
                i += 2
                continue
            return i + 1
        i += 1
    raise SqlSyntaxError(f"a {quote} quote opened at character {start + 1} is never closed")


def _check_parens(tokens: list[Token]) -> None:
    depth = 0
    for token in tokens:
        if token.kind == "op" and token.text == "(":
            depth += 1
        elif token.kind == "op" and token.text == ")":
            depth -= 1
            if depth < 0:
                raise SqlSyntaxError("a ')' has no matching '('")
    if depth:
        raise SqlSyntaxError(f"{depth} '(' never closed with ')'")


def render(tokens: list[Token]) -> str:
    return "".join(t.text for t in tokens)


def literal_value(token: Token) -> str:
    """The value of a SeaTunnel single-quoted literal: '' is a quote, backslashes are kept."""
    return token.text[1:-1].replace("''", "'")


def spark_literal(value: str) -> str:
    """A Spark SQL literal holding exactly ``value`` (Spark unescapes backslashes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def normalize_literals(tokens: list[Token]) -> list[Token]:
    """SeaTunnel's literals -> Spark's: same values, and "name" stays an identifier."""
    out = []
    for token in tokens:
        if token.kind == "str":
            out.append(Token("str", spark_literal(literal_value(token))))
        elif token.kind == "dstr":
            out.append(Token("qid", quote_name(token.text[1:-1].replace('""', '"'))))
        else:
            out.append(token)
    return out


def significant(tokens: list[Token]) -> list[int]:
    return [i for i, t in enumerate(tokens) if t.kind != "ws"]


# Functions whose argument lists hold FROM (EXTRACT(YEAR FROM x)): not a table clause.
_FROM_TAKING_CALLS = {"EXTRACT", "TRIM", "SUBSTRING", "SUBSTR", "OVERLAY", "POSITION", "DATE_PART"}
# Words that may follow a table name and are not an alias of it.
_AFTER_TABLE = {
    "WHERE", "GROUP", "ORDER", "HAVING", "LIMIT", "OFFSET", "LATERAL", "JOIN", "INNER", "LEFT",
    "RIGHT", "FULL", "CROSS", "OUTER", "SEMI", "ANTI", "NATURAL", "ON", "USING", "UNION",
    "INTERSECT", "EXCEPT", "MINUS", "WINDOW", "CLUSTER", "DISTRIBUTE", "SORT", "TABLESAMPLE",
    "PIVOT", "UNPIVOT", "QUALIFY", "FOR", "WITH",
}


@dataclass
class TableRef:
    name: str          # as written, without backticks (a.b for a qualified name)
    start: int         # token index range of the name
    end: int
    has_alias: bool


def table_refs(tokens: list[Token]) -> tuple[list[TableRef], set[str]]:
    """Tables the query reads (after FROM / JOIN) and the names its WITH clause defines."""
    sig = significant(tokens)
    refs: list[TableRef] = []
    ctes: set[str] = set()
    stack: list[bool] = []           # per open paren: does it belong to a FROM-taking call?
    for pos, idx in enumerate(sig):
        token = tokens[idx]
        prev = tokens[sig[pos - 1]] if pos else None
        nxt = tokens[sig[pos + 1]] if pos + 1 < len(sig) else None
        if token.kind == "op" and token.text == "(":
            stack.append(bool(prev and prev.kind == "ident" and prev.upper in _FROM_TAKING_CALLS))
        elif token.kind == "op" and token.text == ")":
            stack.pop()
        elif token.is_word("AS") and prev is not None and prev.kind in ("ident", "qid") \
                and nxt is not None and nxt.text == "(":
            ctes.add(_bare(prev.text).lower())
        elif token.is_word("FROM", "JOIN") and not (stack and stack[-1]):
            ref = _read_table(tokens, sig, pos + 1)
            if ref:
                refs.append(ref)
    return refs, ctes


def _read_table(tokens: list[Token], sig: list[int], pos: int) -> TableRef | None:
    parts: list[str] = []
    start = end = None
    while pos < len(sig) and tokens[sig[pos]].kind in ("ident", "qid"):
        parts.append(_bare(tokens[sig[pos]].text))
        start = sig[pos] if start is None else start
        end = sig[pos]
        if pos + 2 < len(sig) and tokens[sig[pos + 1]].text == ".":
            pos += 2
            continue
        pos += 1
        break
    if not parts:
        return None
    after = tokens[sig[pos]] if pos < len(sig) else None
    if after is not None and after.text == "(":
        return None                   # a table-valued function: range(10)
    has_alias = after is not None and (
        after.is_word("AS") or after.kind == "qid"
        or (after.kind == "ident" and after.upper not in _AFTER_TABLE))
    return TableRef(".".join(parts), start, end, has_alias)


def _bare(text: str) -> str:
    return text[1:-1].replace("``", "`") if text.startswith("`") else text


def replace_tables(tokens: list[Token], refs: list[TableRef], view: str) -> list[Token]:
    """Point ``refs`` at ``view``, aliased by the name the query used so t.col still resolves."""
    out = list(tokens)
    for ref in sorted(refs, key=lambda r: r.start, reverse=True):
        text = quote_name(view)
        if not ref.has_alias:
            text += " AS " + quote_name(ref.name.split(".")[-1])
        out[ref.start:ref.end + 1] = [Token("qid", text)]
    return out


def add_row_kind_to_selects(tokens: list[Token]) -> list[Token]:
    """Add the row kind to every SELECT that produces a relation and does not select ``*``.

    A relation SELECT is the top-level one or one inside a table subquery / CTE body
    (a parenthesis opened after FROM, JOIN, AS or another parenthesis); SELECTs inside
    expressions (IN (SELECT ...)) keep their single column.
    """
    sig = significant(tokens)
    inserts: list[int] = []
    relation_paren: list[bool] = []
    for pos, idx in enumerate(sig):
        token = tokens[idx]
        prev = tokens[sig[pos - 1]] if pos else None
        if token.text == "(" and token.kind == "op":
            relation_paren.append(prev is None or prev.text == "("
                                  or prev.is_word("FROM", "JOIN", "AS"))
        elif token.text == ")" and token.kind == "op":
            relation_paren.pop()
        elif token.is_word("SELECT") and (not relation_paren or relation_paren[-1]):
            at = _select_list_start(tokens, sig, pos)
            if at is not None and not _selects_star(tokens, sig, at):
                inserts.append(at)
    out = list(tokens)
    for idx in sorted(inserts, reverse=True):
        out.insert(idx, Token("ident", f" {ROW_KIND_COLUMN},"))
    return out


def _select_list_start(tokens: list[Token], sig: list[int], pos: int) -> int | None:
    """Token index where the select list of the SELECT at ``sig[pos]`` begins (after hints, ALL)."""
    idx = scan = sig[pos] + 1
    while scan < len(tokens) and tokens[scan].kind == "ws":   # hints must stay right after SELECT
        scan += 1
        if tokens[scan - 1].text.startswith("/*+"):
            idx = scan
    nxt = next((i for i in sig if i >= idx), None)
    if nxt is not None and tokens[nxt].is_word("DISTINCT"):
        return None                   # DISTINCT is not per-row; the row kind cannot pass
    if nxt is not None and tokens[nxt].is_word("ALL"):
        return nxt + 1
    return idx


def _selects_star(tokens: list[Token], sig: list[int], at: int) -> bool:
    """Whether the select list starting at token ``at`` has a top-level ``*`` or ``t.*`` item."""
    depth = 0
    item_start = True
    for idx in (i for i in sig if i >= at):
        token = tokens[idx]
        if token.text == "(" and token.kind == "op":
            depth += 1
        elif token.text == ")" and token.kind == "op":
            if depth == 0:
                return False
            depth -= 1
        elif depth == 0 and token.is_word("FROM"):
            return False
        elif depth == 0 and token.text == "*" and (item_start or _after_dot(tokens, sig, idx)):
            return True
        elif depth == 0 and token.text == ",":
            item_start = True
            continue
        item_start = False
    return False


def _after_dot(tokens: list[Token], sig: list[int], idx: int) -> bool:
    before = [i for i in sig if i < idx]
    return bool(before) and tokens[before[-1]].text == "."
