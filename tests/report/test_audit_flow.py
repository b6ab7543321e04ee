"""The report drawn from real model audits: the "Gradient flow" section shows every audited
parameter with its status (read from the typed ``ParameterFlow`` record each audit writes),
and no audited parameter appears as an op of the matrix."""

from __future__ import annotations

import re

import pytest

from gradcheck.report import model, write_report
from tests.support.audit_streams import audited_streams

pytest.importorskip("torch")


def test_every_audited_parameter_is_in_the_flow_map_and_none_is_an_op(tmp_path):
    data, names = audited_streams(tmp_path)
    assert all(r.flow is not None for r in data.checks if r.kind == "flow"
               and r.name in names["torch"])  # the typed record survives the stream
    maps = model.flow_maps(data.checks)
    assert len(maps) == len(names)
    for fm, backend in zip(maps, names, strict=True):
        assert backend in fm.title
        assert {n for n, _, _ in fm.parameters} == names[backend]
    torch_map = dict((n, s) for n, s, _ in maps[0].parameters)
    assert torch_map["body.weight"] == "flows" and torch_map["target.weight"] == \
        "blocked as intended"
    assert torch_map["spare.weight"] == "unused"
    assert all(not set(names[b]) & set(model.build_matrix(data.checks).ops) for b in names)
    page = write_report(data, tmp_path / "out").html.read_text()
    section = page[page.index('id="flow"'):]
    section = section[:section.index("</section>")]
    drawn = re.findall(r'<div class="param fl-([a-z_]+)"[^>]*><span>([^<]+)</span>', section)
    assert {n for _, n in drawn} == set().union(*names.values())
    assert ("blocked_as_intended", "target.bias") in drawn
