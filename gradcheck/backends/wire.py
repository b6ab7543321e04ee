"""Wire format of the process protocol (``docs/protocol.md``): JSON lines and encoded arrays.

One request per line on the child's stdin, one response per line on its stdout::

    {"id": 7, "method": "vjp", "params": {...}}
    {"id": 7, "result": {...}}          or   {"id": 7, "error": {"type": "...", "message": "..."}}

An array is ``{"dtype": "float32", "shape": [3, 4], "data": "<base64>"}``: ``data`` is always
the little-endian float64 bytes of the C-ordered values, whatever ``dtype`` (the dtype the
values belong to) says, so every language decodes one format.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

PROTOCOL_VERSION = 1
#: error types a child may answer with; ``unsupported`` becomes a skipped check
ERROR_TYPES = ("unsupported", "invalid_request", "engine_error", "version_mismatch")


class ProtocolError(RuntimeError):
    """The child broke the protocol (malformed line, wrong id, bad array, crash, timeout)."""


class ProtocolTimeout(ProtocolError, TimeoutError):
    """The child did not read or answer a request within the request timeout (a
    ``TimeoutError``: the adapter boundary reports it as a ``timeout`` failure)."""


class RemoteError(RuntimeError):
    """The child answered a request with an ``error`` object."""

    def __init__(self, method: str, kind: str, message: str) -> None:
        super().__init__(f"child answered {method!r} with {kind}: {message}")
        self.method = method
        self.kind = kind
        self.remote_message = message


class RemoteUnsupported(RemoteError, NotImplementedError):
    """``error.type == "unsupported"``: the child lacks this capability or op (a skip)."""


def encode_array(a: np.ndarray, dtype: str | None = None) -> dict[str, Any]:
    """``a`` as a wire array; ``dtype`` defaults to ``a``'s own dtype name."""
    arr = np.asarray(a)
    data = np.ascontiguousarray(arr, dtype="<f8").tobytes()
    return {"dtype": dtype or arr.dtype.name, "shape": list(arr.shape),
            "data": base64.b64encode(data).decode("ascii")}


def decode_array(obj: Any, what: str = "array") -> np.ndarray:
    """A wire array as a float64 NumPy array; raises :class:`ProtocolError` if malformed."""
    if not isinstance(obj, dict) or not {"shape", "data"} <= obj.keys():
        raise ProtocolError(f"{what} is not an array object {{dtype, shape, data}}: "
                            f"{_clip(json.dumps(obj, default=str))}")
    shape = obj["shape"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ProtocolError(f"{what} has an invalid shape {shape!r}")
    try:
        raw = base64.b64decode(obj["data"], validate=True)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"{what}: data is not valid base64 ({exc})") from exc
    size = int(np.prod(shape)) if shape else 1
    if len(raw) != 8 * size:
        raise ProtocolError(f"{what}: {len(raw)} bytes of data for shape {shape} "
                            f"(expected {8 * size}: float64 little-endian)")
    return np.frombuffer(raw, dtype="<f8").astype(np.float64).reshape(shape)


_NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def encode_scalar(x: float) -> float | str:
    """A float for JSON: finite values as numbers, non-finite ones as the strings ``"NaN"``,
    ``"Infinity"`` and ``"-Infinity"`` (JSON has no non-finite numbers)."""
    x = float(x)
    if np.isfinite(x):
        return x
    return "NaN" if np.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def decode_scalar(v: Any, what: str = "scalar") -> float:
    """The inverse of :func:`encode_scalar`; raises :class:`ProtocolError` for anything else."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ProtocolError(f"{what} must be a number or one of {sorted(_NONFINITE)}, got {v!r}")
    if isinstance(v, str):
        if v not in _NONFINITE:
            raise ProtocolError(f"{what} must be a number or one of {sorted(_NONFINITE)}, "
                                f"got {v!r}")
        return _NONFINITE[v]
    return float(v)


def dumps_request(request_id: int, method: str, params: dict[str, Any]) -> str:
    """One request line (no newline)."""
    return json.dumps({"id": request_id, "method": method, "params": params},
                      separators=(",", ":"))


def parse_response(line: str, request_id: int, method: str) -> dict[str, Any]:
    """Validate one response line; return its ``result`` or raise the error it carries."""
    try:
        msg = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"malformed line from the child in answer to {method!r} "
                            f"(not JSON: {exc.msg}): {_clip(line)!r}") from exc
    if not isinstance(msg, dict) or "id" not in msg:
        raise ProtocolError(f"malformed message from the child in answer to {method!r} "
                            f"(no id): {_clip(line)!r}")
    if msg["id"] != request_id:
        raise ProtocolError(f"the child answered id {msg['id']!r} while {method!r} (id "
                            f"{request_id}) was pending: responses out of step")
    if "error" in msg:
        err = msg["error"] if isinstance(msg["error"], dict) else {"message": msg["error"]}
        kind = str(err.get("type", "engine_error"))
        cls = RemoteUnsupported if kind == "unsupported" else RemoteError
        raise cls(method, kind, str(err.get("message", "")))
    result = msg.get("result")
    if not isinstance(result, dict):
        raise ProtocolError(f"malformed answer to {method!r}: 'result' must be an object, got "
                            f"{_clip(json.dumps(result, default=str))}")
    return result


def _clip(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[:n] + "..."
