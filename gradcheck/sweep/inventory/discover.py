"""The inventory of one backend, dispatched on its name to the walker that reads it
(:mod:`.from_torch`, :mod:`.from_jax`, :mod:`.from_others`)."""

from __future__ import annotations

from collections.abc import Sequence

from gradcheck.sweep.inventory.records import Inventory


def inventory(backend: str, names: Sequence[str] | None = None) -> Inventory:
    """The inventory of ``backend`` (``torch``, ``jax``, ``autograd``, ``mlx``, ``tinygrad``);
    ``names`` narrows it to those ops (globs) before any template is built."""
    if backend == "torch":
        from gradcheck.sweep.inventory import from_torch

        return from_torch.inventory(names)
    if backend == "jax":
        from gradcheck.sweep.inventory import from_jax

        return from_jax.inventory(names)
    from gradcheck.sweep.inventory import from_others

    return from_others.inventory(backend, names)
