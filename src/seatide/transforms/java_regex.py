"""Checking Java regular expressions before Spark runs them.

SeaTunnel's ``Replace`` and ``Split`` take Java regexes, and Spark evaluates them with
``java.util.regex``. A job file is validated before any JVM starts, so ``syntax_error``
translates the Java-only constructs to Python's dialect and lets ``re`` judge the rest:
it catches the mistakes people make (an unclosed group, a dangling quantifier) and never
rejects valid Java syntax it knows. ``jvm_syntax_error`` asks the JVM itself, at ``apply``,
for an exact answer before a query starts.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

# Escapes Java knows and Python does not; each becomes something Python accepts in
# the same places (inside and outside character classes).
_JAVA_ONLY_ESCAPES = {"h": ".", "H": ".", "v": ".", "V": ".", "R": ".", "X": ".", "e": ".",
                      "z": r"\Z", "G": ""}
_JAVA_FLAGS = "idmsuxU"
_PYTHON_FLAGS = "imsux"


def syntax_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid Java regex, or None when it looks valid."""
    try:
        translated = _to_python(pattern)
    except ValueError as exc:
        return str(exc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Python warns about Java's nested classes ([a&&[b]])
        try:
            re.compile(translated)
        except re.error as exc:
            return exc.msg
    return None


def jvm_syntax_error(spark: Any, pattern: str) -> str | None:
    """The JVM's verdict on ``pattern`` (None when valid or when no JVM is reachable)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return None
    try:
        jvm.java.util.regex.Pattern.compile(pattern)
    except Exception as exc:  # py4j wraps PatternSyntaxException
        java_exc = getattr(exc, "java_exception", None)
        text = java_exc.getMessage() if java_exc is not None else str(exc)
        return str(text).splitlines()[0]
    return None


def _to_python(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            piece, i = _escape(pattern, i)
            out.append(piece)
        elif pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")          # Java's named group
            i += 3
        elif pattern.startswith("(?", i):
            piece, i = _flag_group(pattern, i, at_start=not out)
            out.append(piece)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _escape(pattern: str, i: int) -> tuple[str, int]:
    """Translate the escape at ``pattern[i] == '\\'``; return the text and the next index."""
    if i + 1 >= len(pattern):
        raise ValueError("the pattern ends with a lone backslash; escape it as \\\\")
    ch = pattern[i + 1]
    if ch == "Q":                       # \Q...\E quotes everything between
        end = pattern.find("\\E", i + 2)
        end = len(pattern) if end < 0 else end
        return re.escape(pattern[i + 2:end]), end + 2
    if ch == "E":
        return "", i + 2
    if ch in "pP":                      # \p{Lu}, \pL: a Unicode class
        if pattern.startswith("{", i + 2):
            close = pattern.find("}", i + 3)
            if close < 0:
                raise ValueError(f"unclosed \\{ch}{{...}} character property")
            return r"\w", close + 1
        return r"\w", i + 3
    if ch == "k" and pattern.startswith("<", i + 2):
        close = pattern.find(">", i + 3)
        if close < 0:
            raise ValueError("unclosed \\k<name> back reference")
        return f"(?P={pattern[i + 3:close]})", close + 1
    if ch in "xN" and pattern.startswith("{", i + 2):   # \x{1F600}, \N{NAME}
        close = pattern.find("}", i + 3)
        if close < 0:
            raise ValueError(f"unclosed \\{ch}{{...}} escape")
        return ".", close + 1
    if ch == "b" and pattern.startswith("{g}", i + 2):
        return r"\b", i + 5
    if ch == "c":                       # \cX: a control character
        return ".", i + 3
    if ch in _JAVA_ONLY_ESCAPES:
        return _JAVA_ONLY_ESCAPES[ch], i + 2
    return pattern[i:i + 2], i + 2


def _flag_group(pattern: str, i: int, at_start: bool) -> tuple[str, int]:
    """Java allows inline flags anywhere and has flags Python lacks; keep what Python takes."""
    match = re.match(r"\(\?([%s]*)(?:-([%s]*))?([:)])" % (_JAVA_FLAGS, _JAVA_FLAGS), pattern[i:])
    if not match or not (match.group(1) or match.group(2) is not None):
        return "(?", i + 2
    on = "".join(f for f in match.group(1) if f in _PYTHON_FLAGS)
    off = "".join(f for f in (match.group(2) or "") if f in _PYTHON_FLAGS)
    end = i + match.end()
    if match.group(3) == ":":
        return (f"(?{on}-{off}:" if off else f"(?{on}:"), end
    # A bare (?i): Python only takes positive flags at the very start.
    return (f"(?{on})" if at_start and on and not off else ""), end


def first_match_regex(pattern: str, replacement: str) -> tuple[str, str]:
    """A regex + replacement that ``regexp_replace`` (which replaces every match) applies once.

    Java's ``replaceFirst`` has no Spark function. ``\\A(?<p>(?s:.*?))(?<m>pattern)``
    matches only once per string, from the start through the leftmost match of
    ``pattern`` (a lazy prefix tries every start position in order, exactly as ``find``
    does, and lookbehinds still see the real text); the replacement puts the prefix back
    first. The two added groups shift the pattern's numbered groups by two, so back
    references move with them, and ``$0`` becomes the match group.
    """
    groups = _count_groups(pattern)
    shifted = _shift_pattern_refs(pattern, groups)
    regex = f"\\A(?<{_PREFIX}>(?s:.*?))(?<{_MATCH}>{shifted})"
    return regex, "${" + _PREFIX + "}" + _shift_replacement_refs(replacement, groups)


_PREFIX, _MATCH, _SHIFT = "seatideprefix", "seatidematch", 2


def _count_groups(pattern: str) -> int:
    count, i, in_class = 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if pattern.startswith("\\Q", i):
                end = pattern.find("\\E", i + 2)
                i = len(pattern) if end < 0 else end + 2
                continue
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(" and (not pattern.startswith("(?", i) or
                            (pattern.startswith("(?<", i) and pattern[i + 3:i + 4] not in ("=", "!"))):
            count += 1
        i += 1
    return count


def _read_ref(text: str, i: int, groups: int) -> tuple[int, int]:
    """Java reads a group number greedily while it names an existing group; return (number, end)."""
    number, end = int(text[i]), i + 1
    while end < len(text) and text[end].isdigit() and number * 10 + int(text[end]) <= groups:
        number, end = number * 10 + int(text[end]), end + 1
    return number, end


def _shift_pattern_refs(pattern: str, groups: int) -> str:
    out, i, in_class = [], 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and pattern.startswith("\\Q", i):
            end = pattern.find("\\E", i + 2)
            end = len(pattern) if end < 0 else end + 2
            out.append(pattern[i:end])
            i = end
        elif ch == "\\" and not in_class and pattern[i + 1:i + 2].isdigit() and pattern[i + 1] != "0":
            number, i = _read_ref(pattern, i + 1, groups)
            out.append(f"(?:\\{number + _SHIFT})")    # the group keeps later digits literal
        elif ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
        else:
            in_class = (ch != "]") if in_class else ch == "["
            out.append(ch)
            i += 1
    return "".join(out)


def _shift_replacement_refs(replacement: str, groups: int) -> str:
    out, i = [], 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\":
            out.append(replacement[i:i + 2])
            i += 2
        elif ch == "$" and replacement[i + 1:i + 2].isdigit():
            number, i = _read_ref(replacement, i + 1, groups)
            out.append("${" + _MATCH + "}" if number == 0 else f"${number + _SHIFT}")
            if replacement[i:i + 1].isdigit():     # keep a following digit literal
                out.append("\\")
        else:
            out.append(ch)
            i += 1
    return "".join(out)
