"""The JSON text of a payload jobbuf stages (jsonb), as Celery's JSON would carry it.

Two values jsonb cannot take as Python's json writes them are handled before any statement
reaches the caller's transaction:
- a NUL character (in a string or a key): jsonb cannot store it, and PostgreSQL would abort the
  caller's transaction: NulCharacterError names where it is, with the transaction untouched;
- a float Python writes with a positive exponent (1e16 and up: 1e+16): jsonb keeps it as the
  number 10000000000000000, which json.loads reads back as an int. It is written with the same
  digits, positionally and with a decimal point ("10000000000000000.0"), read back as the float.
"""
import json
import math
import re

_EXPONENT_FORM = re.compile(r"\A(-?)(\d)(?:\.(\d+))?e\+(\d+)\Z")


class NulCharacterError(ValueError):
    """A payload holds a NUL character, which PostgreSQL's jsonb cannot store."""


def _refuse_nul(text, path):
    if "\x00" in text:
        raise NulCharacterError(
            f"jobbuf: {path} contains a NUL character (\\u0000), which PostgreSQL's jsonb cannot "
            "store; nothing was staged and your transaction is untouched. Remove it or encode the "
            "value (e.g. base64).")


def _float_text(value):
    if not math.isfinite(value):
        raise ValueError(f"jobbuf: {value!r} is not a JSON number")
    text = repr(value)
    match = _EXPONENT_FORM.match(text)
    if not match:
        return text
    sign, first, rest, exponent = match.groups()
    digits = first + (rest or "").rstrip("0")
    point = 1 + int(exponent)
    if len(digits) <= point:
        return f"{sign}{digits.ljust(point, '0')}.0"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _write(out, value, path):
    if isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            if not isinstance(key, str):
                key = json.loads(json.dumps({key: None})).popitem()[0]  # json's own key rules
            _refuse_nul(key, f"{path} key {key!r}")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(out, item, f"{path}[{key!r}]")
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(out, item, f"{path}[{i}]")
        out.append("]")
    elif isinstance(value, bool) or value is None or isinstance(value, int):
        out.append(json.dumps(value))
    elif isinstance(value, float):
        out.append(_float_text(value))
    elif isinstance(value, str):
        _refuse_nul(value, path)
        out.append(json.dumps(value, ensure_ascii=False))
    else:
        raise TypeError(f"jobbuf: {path} is a {type(value).__name__}, which JSON cannot carry")


def dumps(payload):
    """The JSON text of payload, for a jsonb parameter."""
    out = []
    _write(out, payload, "payload")
    return "".join(out)
