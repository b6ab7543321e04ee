"""The op inventory of a sweep: what a backend exposes as differentiable, read from the backend.

An :class:`Op` is one differentiable op under its backend's own qualified name
(``torch.nn.functional.silu``, ``jax.scipy.special.erfcx``): a function of float arrays, the
arrays of one call it accepts (its *template*: the shapes and the in-domain values the edge
points start from), the dtypes it declares, and whether forward mode and order 2 apply.  What a
namespace holds but the sweep cannot check is a :class:`LeftOut` record with the reason; both
are data, shown in the report.

The records are in :mod:`.records`; the inventories themselves are read by :mod:`.from_torch`
(OpInfo's ``op_db``), :mod:`.from_jax` (introspecting the public namespaces, with
:mod:`.namespaces`) and :mod:`.from_others` (autograd.numpy, mlx.core, tinygrad);
:func:`.discover.inventory` dispatches on the backend name.
"""

from gradcheck.sweep.inventory.records import (
    ELEMENTWISE,
    LINALG,
    OTHER,
    REDUCTION,
    Inventory,
    LeftOut,
    Op,
    family_of,
    matches,
)

__all__ = ["ELEMENTWISE", "LINALG", "OTHER", "REDUCTION", "Inventory", "LeftOut", "Op",
           "family_of", "matches"]
