"""Every kernel an engine's table records as measured off the correctly rounded value
(``gradcheck.engines.torch.kernels.KNOWN``, ``gradcheck.engines.jax.kernels.KNOWN``) cites a
finding of docs/upstream's index, whose reproducer ``test_reproducers`` runs: a known mark on a
user's result always leads to a reproducer and its upstream status."""

from __future__ import annotations

import importlib

import pytest

from tests.upstream._index import UPSTREAM, index_rows


@pytest.mark.parametrize("engine", ["torch", "jax"])
def test_each_known_kernel_cites_a_finding_with_a_reproducer(engine):
    pytest.importorskip(engine)
    table = importlib.import_module(f"gradcheck.engines.{engine}.kernels").KNOWN
    rows = {row[0]: row for row in index_rows()}
    cited = {(dtype, op): k for dtype, ops in table.items() for op, k in ops.items()}
    assert cited
    for (dtype, op), known in cited.items():
        row = rows.get(known.finding)
        assert row is not None, f"{engine} {dtype} {op} cites {known.finding}, not in the index"
        assert row[1] == engine and row[3] is not None and (UPSTREAM / row[3]).is_file()
        if known.link:  # an upstream report: the index row's status names it
            assert known.link.rsplit("/", 1)[-1] in row[2], (known, row)
