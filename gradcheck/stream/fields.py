"""Type checks of every field the report reads from a stream record.

A stream may have been edited by hand, written by another gradcheck version or damaged: each
record is checked here before anything uses it, so a wrong type (``"status": 5``, ``"shapes":
"x"``, ``"details": []``, ``"discrepancy_ratio": "abc"``) makes the record invalid (skipped and
reported by :mod:`gradcheck.stream.reader`) instead of an exception somewhere in the report.
Numbers are returned as floats (``"inf"``, ``"-inf"``, ``"nan"`` included), indexes as ints.
"""

from __future__ import annotations

import math
from typing import Any

from gradcheck.core.results import FlowStatus, Status

#: deeper JSON is refused: the report walks nested values recursively
MAX_DEPTH = 64
TEST_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")

_STR_FIELDS = ("device", "dtype", "name", "allowed_source", "message", "reproducer", "test_id")
_INT_FIELDS = ("input_index", "output_index", "seed")
_NUMBER_FIELDS = ("expected", "actual", "discrepancy", "relative_discrepancy", "allowed",
                  "discrepancy_ratio", "duration_s")
#: the typed fields of keys that older streams carry in ``details`` (both forms are accepted)
_TYPED_STRINGS = ("path", "bug_class", "section", "computed_in", "alternative", "localized",
                  "input_path")
_TYPED_INTS = ("probe", "probes", "elements_over")
_TYPED_NUMBERS = ("rounding_level", "max_abs_discrepancy", "max_rel_discrepancy")
_ENV_STRINGS = ("role", "host", "started", "gradcheck", "python", "implementation", "platform",
                "machine")


class InvalidField(ValueError):
    """A field of a record has the wrong type; the message names the field and both types."""


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _fail(where: str, expected: str, value: Any) -> InvalidField:
    return InvalidField(f"{where}: expected {expected}, got {_kind(value)}")


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` levels (checked without
    recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (list, dict)):
            if depth > limit:
                return True
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def string(obj: dict[str, Any], key: str, *, required: bool = False,
           nullable: bool = False) -> Any:
    value = obj.get(key)
    if key not in obj:
        if required:
            raise InvalidField(f"{key}: missing")
        return None
    if isinstance(value, str) or (nullable and value is None):
        return value
    raise _fail(key, "a string" + (" or null" if nullable else ""), value)


def number(value: Any, where: str) -> float | None:
    """A JSON number (or ``"inf"``/``"-inf"``/``"nan"``) as a float; None stays None."""
    if value is None:
        return None
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise InvalidField(f"{where}: an integer too large for a float") from None
    raise _fail(where, 'a number, "inf", "-inf", "nan" or null', value)


def integer(value: Any, where: str, *, nullable: bool = True) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _fail(where, "an integer" + (" or null" if nullable else ""), value)


def _array(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, "an array", value)
    return value


def check_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The ``check`` record with every field type-checked and numbers as floats (the input of
    :meth:`gradcheck.core.results.CheckResult.from_dict`)."""
    out = dict(obj)
    for key in ("kind", "backend"):
        string(obj, key, required=True)
    status = obj.get("status")
    if not isinstance(status, str) or status not in {s.value for s in Status}:
        raise InvalidField(f"status: expected one of {', '.join(s.value for s in Status)}, "
                           f"got {status!r}"[:200])
    for key in _STR_FIELDS:
        string(obj, key)
    for key in _INT_FIELDS:
        if key in obj:
            out[key] = integer(obj[key], key)
    for key in _TYPED_STRINGS:  # typed fields streams before them lack
        string(obj, key, nullable=True)
    for key in _TYPED_INTS:
        if key in obj:
            out[key] = integer(obj[key], key)
    for key in _TYPED_NUMBERS:
        if key in obj:
            out[key] = number(obj[key], key)
    if obj.get("flow") is not None:
        out["flow"] = _flow(obj["flow"], "flow")
    if obj.get("sweep") is not None:
        _sweep(obj["sweep"], "sweep")
    if obj.get("triage") is not None:
        _triage(obj["triage"], "triage")
    if obj.get("known_as") is not None:
        _known_as(obj["known_as"], "known_as")
    if "order" in obj:
        out["order"] = integer(obj["order"], "order", nullable=False)
    for key in _NUMBER_FIELDS:
        if key in obj:
            out[key] = number(obj[key], key)
    if "shapes" in obj:
        out["shapes"] = [[integer(n, f"shapes[{i}][{j}]", nullable=False)
                          for j, n in enumerate(_array(s, f"shapes[{i}]"))]
                         for i, s in enumerate(_array(obj["shapes"], "shapes"))]
    if "worst" in obj:
        out["worst"] = [_worst(w, f"worst[{i}]")
                        for i, w in enumerate(_array(obj["worst"], "worst"))]
    if "convergence" in obj:
        out["convergence"] = [_pair(c, f"convergence[{i}]")
                              for i, c in enumerate(_array(obj["convergence"], "convergence"))]
    if "details" in obj and not isinstance(obj["details"], dict):
        raise _fail("details", "an object", obj["details"])
    return out


def _flow(value: Any, where: str) -> dict[str, Any]:
    """An audited parameter's flow record (:class:`gradcheck.core.results.ParameterFlow`)."""
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    out = dict(value)
    string(value, "name", required=True)
    string(value, "message")
    for key, values in (("status", FlowStatus), ("gradient_check", Status)):
        if value.get(key) not in {v.value for v in values}:
            raise InvalidField(f"{where}.{key}: expected one of "
                               f"{', '.join(v.value for v in values)}, got "
                               f"{value.get(key)!r}"[:200])
    for key in ("declared_stopped", "trainable"):
        if not isinstance(value.get(key), bool):
            raise _fail(f"{where}.{key}", "a boolean", value.get(key))
    for key in ("ad_norm", "fd_dependence", "fd_noise", "ad_projection"):
        if key in value:
            out[key] = number(value[key], f"{where}.{key}")
            if out[key] is None:
                raise InvalidField(f"{where}.{key}: expected a number, got null")
    for key in ("ad_norm", "fd_dependence", "fd_noise"):
        if key not in value:
            raise InvalidField(f"{where}.{key}: missing")
    out["shape"] = [integer(n, f"{where}.shape[{j}]", nullable=False)
                    for j, n in enumerate(_array(value.get("shape", []), f"{where}.shape"))]
    for j, c in enumerate(_array(value.get("cut_points", []), f"{where}.cut_points")):
        if not isinstance(c, str):
            raise _fail(f"{where}.cut_points[{j}]", "a string", c)
    return out


def _sweep(value: Any, where: str) -> None:
    """A sweep result's origin (:class:`gradcheck.core.results.SweepInfo`)."""
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    for key in ("point", "profile", "family", "oracle", "skipped", "left_out", "overruled"):
        string(value, key, nullable=True)
    for key in ("order", "repaired", "exitcode"):
        if key in value:
            integer(value[key], f"{where}.{key}")
    if "hung_s" in value:
        number(value["hung_s"], f"{where}.hung_s")


def _known_as(value: Any, where: str) -> None:
    """The known discrepancy a result shows (:class:`gradcheck.core.results.KnownMark`, as
    ``details`` carries it: ``known`` or ``known_behaviour``, ``known_nature``, ``upstream``)."""
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    for key in ("known", "known_behaviour", "known_nature", "upstream"):
        string(value, key, nullable=True)
    if not (value.get("known") or value.get("known_behaviour")):
        raise _fail(where, "an object with a 'known' or 'known_behaviour' reason", value)


def _triage(value: Any, where: str) -> None:
    """A sweep triage (:class:`gradcheck.core.results.Triage`)."""
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    string(value, "class", required=True)
    for key in ("symptom", "reproducer"):
        string(value, key)
    string(value, "key", nullable=True)
    if value.get("evidence") is not None and not isinstance(value["evidence"], dict):
        raise _fail(f"{where}.evidence", "an object or null", value["evidence"])


def _worst(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "an object", value)
    index = [integer(n, f"{where}.index[{j}]", nullable=False)
             for j, n in enumerate(_array(value.get("index"), f"{where}.index"))]
    numbers = {k: number(value.get(k), f"{where}.{k}") for k in ("actual", "expected", "allowed")}
    missing = [k for k, v in numbers.items() if v is None]
    if missing:
        raise InvalidField(f"{where}.{missing[0]}: expected a number, got null or nothing")
    return {"index": index, **numbers}


def _pair(value: Any, where: str) -> list[float]:
    pair = [number(v, f"{where}[{j}]") for j, v in enumerate(_array(value, where))]
    if len(pair) != 2 or None in pair:
        raise InvalidField(f"{where}: expected [step, estimate], two numbers")
    return pair  # type: ignore[return-value]


def outcome_fields(obj: dict[str, Any]) -> tuple[str, str, float, str]:
    """``(test_id, outcome, duration_s, message)`` of a ``test`` record."""
    test_id = string(obj, "test_id", required=True)
    outcome = obj.get("outcome")
    if outcome not in TEST_OUTCOMES:
        raise InvalidField(f"outcome: expected one of {', '.join(TEST_OUTCOMES)}, "
                           f"got {outcome!r}"[:200])
    duration = number(obj.get("duration_s"), "duration_s") or 0.0
    if not math.isfinite(duration) or duration < 0:
        raise InvalidField(f"duration_s: expected a finite number >= 0, got {duration}")
    return test_id, outcome, duration, string(obj, "message", nullable=True) or ""


def known_fields(obj: dict[str, Any]) -> tuple[str, str]:
    """``(known, link)`` of a ``test`` record: its ``gradcheck_known`` marker's reason and link
    (empty where it has none)."""
    return (string(obj, "known", nullable=True) or "", string(obj, "link", nullable=True) or "")


def environment_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The ``environment`` record's fields (those the report shows are type-checked)."""
    for key in _ENV_STRINGS:
        string(obj, key, nullable=True)
    if "pid" in obj:
        integer(obj["pid"], "pid")
    git = obj.get("git")
    if git is not None:
        if not isinstance(git, dict):
            raise _fail("git", "an object or null", git)
        string(git, "commit", nullable=True)
        if not isinstance(git.get("dirty", False), (bool, type(None))):
            raise _fail("git.dirty", "a boolean", git["dirty"])
    packages = obj.get("packages")
    if packages is not None:
        if not isinstance(packages, dict):
            raise _fail("packages", "an object or null", packages)
        for name in packages:
            string(packages, name, nullable=True)
    return {k: v for k, v in obj.items() if k not in ("schema", "record", "run_id")}


def backends_fields(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The adapters listed by a ``backends`` record."""
    out = []
    for i, b in enumerate(_array(obj.get("backends"), "backends")):
        where = f"backends[{i}]"
        if not isinstance(b, dict):
            raise _fail(where, "an object", b)
        string(b, "name", required=True)
        string(b, "version", nullable=True)
        for key in ("devices", "dtypes"):
            if key in b:
                for j, v in enumerate(_array(b[key], f"{where}.{key}")):
                    if not isinstance(v, str):
                        raise _fail(f"{where}.{key}[{j}]", "a string", v)
        if not isinstance(b.get("semantics", {}), dict):
            raise _fail(f"{where}.semantics", "an object", b["semantics"])
        out.append(b)
    return out


def end_fields(obj: dict[str, Any]) -> int | None:
    """The exit status of an ``end`` record (its other fields type-checked)."""
    integer(obj.get("results"), "results")
    string(obj, "finished", nullable=True)
    return integer(obj.get("exitstatus"), "exitstatus")
