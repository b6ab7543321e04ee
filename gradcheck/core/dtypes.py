"""Dtypes by name: the one place that turns a dtype name into a NumPy dtype.

A dtype under test is named by a string (``"float64"``, ``"float32"``, ``"float16"``,
``"bfloat16"``).  NumPy has no ``bfloat16`` of its own: :func:`numpy_dtype` gives ml_dtypes'
(shipped with JAX, imported only when asked for), and :func:`is_floating`,
:func:`is_complex`, :func:`float_bits` and :func:`float_info` count ml_dtypes' extension types
(what ``np.asarray`` gives for a JAX bfloat16 array) as the floating types they are.  NumPy
only: no engine is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: the floating dtype names in the order :func:`widest_dtype` prefers them
_WIDTH_ORDER = ("float64", "float32", "bfloat16", "float16")
# ml_dtypes' extension types (what np.asarray gives for a JAX bfloat16 array): NumPy does not
# count them as floating or complex (np.issubdtype(bfloat16, np.floating) is False)
_EXTENSION_FLOAT_PREFIXES = ("bfloat16", "float8_", "float6_", "float4_")
_EXTENSION_COMPLEX = ("complex32", "bcomplex32")


def numpy_dtype(dtype: Any) -> Any:
    """The NumPy dtype of ``dtype`` (a name such as ``"float32"``, or anything ``np.dtype``
    takes); ``"bfloat16"`` gives ml_dtypes' ``bfloat16`` type (ml_dtypes is imported only then)."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        import ml_dtypes  # shipped with jax; bfloat16 inputs need it

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def is_floating(dtype: Any) -> bool:
    """True for a real floating dtype: NumPy's, and ml_dtypes' ``bfloat16``, ``float8_*``,
    ``float6_*`` and ``float4_*``."""
    dt = np.dtype(dtype)
    return bool(np.issubdtype(dt, np.floating)) or (
        not np.issubdtype(dt, np.number) and dt.name.startswith(_EXTENSION_FLOAT_PREFIXES))


def is_complex(dtype: Any) -> bool:
    """True for a complex dtype (NumPy's, and ml_dtypes' ``complex32`` / ``bcomplex32``)."""
    dt = np.dtype(dtype)
    return bool(np.issubdtype(dt, np.complexfloating)) or dt.name in _EXTENSION_COMPLEX


def float_info(dtype: Any) -> Any:
    """Machine limits (``np.finfo``) of a floating dtype, by name or dtype, ml_dtypes' included."""
    dt = np.dtype(numpy_dtype(dtype))
    if dt.name.startswith(_EXTENSION_FLOAT_PREFIXES):
        import ml_dtypes  # only reachable with an ml_dtypes dtype in hand

        return ml_dtypes.finfo(dt)
    return np.finfo(dt)


def float_bits(dtype: Any) -> int:
    """Width in bits of a floating dtype (:func:`is_floating`), ml_dtypes' included."""
    return int(float_info(dtype).bits)


def widest_dtype(dtypes: Sequence[str]) -> str:
    """The widest floating dtype of ``dtypes`` (float64 where present): the precision an engine's
    rules are judged in when it has no float64 (TensorFlow.js), and the default of its probes."""
    return next((d for d in _WIDTH_ORDER if d in dtypes), dtypes[0])
