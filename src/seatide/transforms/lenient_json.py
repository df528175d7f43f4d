"""JSON as SeaTunnel's JsonPath reads it: strict JSON, and the forms its parser lets through.

SeaTunnel's JsonPath transform reads text with Jayway JsonPath's default parser, json-smart
in its permissive mode, which takes documents strict JSON refuses. SeaTunnel's own jobs rely
on it: a JSON document written unquoted in a HOCON list (``["{"data":{"c": "x y"}}"]``)
reaches the transform as ``{data:{c: x y}}``, keys and values without their quotes.

``with_readable`` rewrites such a document into strict JSON, in Spark expressions (no Python
worker: a row Spark reads as it is costs nothing more). The document is cut into tokens
(quoted strings, ``{}[]:,`` and the bare words between them) and each token is rewritten:

* a bare word before ``:`` is a key and gets quotes;
* a bare value keeps its type when it is ``true``, ``false``, ``null`` or a number (leading
  zeros dropped), and is quoted text otherwise (``this is a string``);
* a string in single quotes gets double quotes;
* extra commas (``[1,,2]``, ``{a:1,}``) go.

Only a document that starts as an object or a list is rewritten: bare text (``abc``) stays
"not JSON", so ``row_error_handle_way`` still sees it. Not taken: a bare value holding
``:``, ``,`` or a bracket (json-smart reads ``t: 16:12`` as one value; quote it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_STRUCTURE = "{}\\[\\],:"
_TOKEN = ("\"(?:[^\"\\\\]|\\\\.)*\""              # "double quoted"
          "|'(?:[^'\\\\]|\\\\.)*'"                  # 'single quoted'
          "|,(?:\\s*,)*"                          # a comma, or a run of them (one token)
          "|[{}\\[\\]:]"                            # { } [ ] :
          f"|[^{_STRUCTURE}\"'\\s](?:[^{_STRUCTURE}\"']*[^{_STRUCTURE}\"'\\s])?")   # a bare word, trimmed
_JSON_LITERAL = "^(?:-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)$"
_LEADING_ZEROS = "^-?0+[0-9]+(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$"


def with_readable(df: "DataFrame", text: "Column", name: str) -> tuple["DataFrame", list[str]]:
    """``df`` with ``name``: ``text`` as strict JSON (strict JSON as it is, else the lenient
    rewrite when that reads, else the text unchanged), and ``name + "_is_json"``: whether the
    row's text is JSON at all (null text counts as JSON). Returns the columns it added.

    Each step is a column of its own, computed once per row: Spark would otherwise copy the
    rewrite into every expression that reads the result, and a row Spark reads as it is is
    never rewritten (the rewrite is under ``CASE WHEN``)."""
    from pyspark.sql import functions as F

    strict, rewritten, is_json = f"{name}_strict", f"{name}_lenient", f"{name}_is_json"
    df = df.withColumn(strict, F.get_json_object(text, "$").isNotNull())
    df = df.withColumn(rewritten, F.when(~F.col(strict) & text.rlike("^\\s*[\\[{]"), _rewrite(text)))
    lenient = F.get_json_object(F.col(rewritten), "$").isNotNull()
    df = df.withColumns({
        name: F.when(F.col(strict), text).when(lenient, F.col(rewritten)).otherwise(text),
        is_json: F.col(strict) | text.isNull() | lenient})
    return df, [strict, rewritten, name, is_json]


def _rewrite(text: "Column") -> "Column":
    from pyspark.sql import functions as F

    tokens = F.regexp_extract_all(text, F.lit(_TOKEN), 0)
    # each token with its neighbours, so the lambda below never refers to the whole list
    size = F.size(tokens)
    before = F.concat(F.array(F.lit("")), F.slice(tokens, 1, size - 1))
    after = F.concat(F.slice(tokens, 2, size), F.array(F.lit("")))
    triples = F.arrays_zip(tokens.alias("t"), before.alias("b"), after.alias("a"))

    def rewrite(z: "Column") -> "Column":
        t, b, a = z["t"], z["b"], z["a"]
        inner = t.substr(F.lit(2), F.length(t) - 2)
        single = F.regexp_replace(F.regexp_replace(inner, r"\\'", "'"), r'(?<!\\)"', r'\\"')
        extra_comma = b.isin("", "[", "{") | a.isin("", "]", "}")
        return (F.when(t.startswith('"'), t)
                .when(t.startswith("'"), F.concat(F.lit('"'), single, F.lit('"')))
                .when(t.isin("{", "}", "[", "]", ":"), t)
                .when(t.startswith(","), F.when(extra_comma, F.lit("")).otherwise(F.lit(",")))
                .when(a == ":", _quoted(t))                       # a key
                .when(t.rlike(_JSON_LITERAL), t)
                .when(t.rlike(_LEADING_ZEROS), F.regexp_replace(t, "^(-?)0+(?=[0-9])", "$1"))
                .otherwise(_quoted(t)))

    return F.array_join(F.transform(triples, rewrite), "")


def _quoted(word: "Column") -> "Column":
    from pyspark.sql import functions as F

    escaped = F.regexp_replace(F.regexp_replace(word, r"\\", r"\\\\"), '"', r'\\"')
    return F.concat(F.lit('"'), escaped, F.lit('"'))
