"""FLOAT / DOUBLE values printed the way each producer's runtime prints them.

A FLOAT column holds a float32: every producer prints the float32's shortest digits, but
each in its own notation, and a consumer must read all of them back to the same value:

- Go `strconv.FormatFloat(v, 'f', -1, bits)` (TiCDC Canal-JSON text): positional, never an
  exponent: 3.4028235e38 -> "340282350000000000000000000000000000000".
- Go `encoding/json` (TiCDC Open Protocol and Debezium numbers): positional, except an
  exponent below 1e-6 and from 1e21 on ("3.4028235e+38", "1e-7").
- Java `Float.toString` / `Double.toString` (Canal, Debezium's Jackson): positional from
  1e-3 to below 1e7 with at least one fraction digit ("1.0"), else "3.4028235E38".
"""

from __future__ import annotations

import numpy as np


def _value(v: float, bits: int):
    return np.float32(v) if bits == 32 else np.float64(v)


def shortest_digits(v: float, bits: int) -> tuple[str, str, int]:
    """(sign, digits, exponent): the value is digits[0].digits[1:] x 10^exponent."""
    text = np.format_float_scientific(_value(v, bits), unique=True, trim="-")
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exp = text.lstrip("-").partition("e")
    return sign, mantissa.replace(".", ""), int(exp)


def go_fixed(v: float, bits: int) -> str:
    """strconv.FormatFloat(v, 'f', -1, bits)."""
    return np.format_float_positional(_value(v, bits), unique=True, trim="-")


def go_json(v: float, bits: int) -> str:
    """Go encoding/json's number text for a float32 / float64."""
    a = abs(float(_value(v, bits)))
    if a != 0 and (a < 1e-6 or a >= 1e21):
        sign, digits, exp = shortest_digits(v, bits)
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}".replace("e-0", "e-")
    return go_fixed(v, bits)


def java(v: float, bits: int) -> str:
    """Java Float.toString / Double.toString (JDK 19+: shortest digits)."""
    a = abs(float(_value(v, bits)))
    sign, digits, exp = shortest_digits(v, bits)
    if a == 0:
        return sign + "0.0"
    if 1e-3 <= a < 1e7:
        text = go_fixed(v, bits).lstrip("-")
        return sign + (text if "." in text else text + ".0")
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exp}"
