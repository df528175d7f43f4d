"""Decimal values for a Spark ``decimal(p, s)``: every digit that fits is kept, the rest refused.

Python's default decimal context holds 28 significant digits, fewer than the 38 of a Spark
decimal, so rounding a value to its scale there fails (or, caught, became a silent null) for
values such as ``12345678901.5`` in a ``decimal(38, 18)``. Here each conversion gets a
context of the target's own precision: fraction digits beyond the scale are rounded half to
even, as a database rounds on a cast (or refused, for a caller that must not alter a value); a value whose integer part needs more than ``p - s``
digits, NaN and infinities cannot be held at all and raise ``DecimalOverflow``, which the
reader turns into an error naming the column.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Callable


class DecimalOverflow(ValueError):
    """A value a ``decimal(p, s)`` cannot hold; the message says which and why."""


def decimal_converter(precision: int, scale: int, exact: bool = False) -> Callable[[object], Decimal | None]:
    """A function from text, int, float or Decimal to a Decimal of exactly ``scale`` places.
    ``exact``: a value with more fraction digits than ``scale`` raises ``DecimalOverflow`` rather
    than being rounded (a source column wider than the Spark type: rounding would alter it)."""
    quantum = Decimal(1).scaleb(-scale)
    context = Context(prec=precision, rounding=ROUND_HALF_EVEN)
    integer_digits = precision - scale

    def convert(value):
        if value is None:
            return None
        number = value if isinstance(value, Decimal) else Decimal(str(value))
        if not number.is_finite():
            raise DecimalOverflow(f"value {value} has no decimal({precision}, {scale}) form")
        try:
            if number and number.adjusted() >= integer_digits:
                raise InvalidOperation
            held = number.quantize(quantum, context=context)
        except InvalidOperation:   # the integer part, or the rounding's carry, needs more digits
            raise DecimalOverflow(
                f"value {value} does not fit decimal({precision}, {scale}), which holds "
                f"{integer_digits} digits before the point") from None
        if exact and held != number:
            raise DecimalOverflow(f"value {value} has more than {scale} digits after the point, which "
                                  f"decimal({precision}, {scale}) would round")
        return held
    return convert


__all__ = ["DecimalOverflow", "decimal_converter"]
