"""The typed fields of the ``details`` keys read outside the package that writes them
(``computed_in``, ``rounding_level``, ``flow``, ``sweep``, ``triage``, ``probe``/``probes``,
``alternative`` (``details["path"]``), ``localized`` and the element summary): round trips through
``to_json``/``from_json`` and the stream reader, streams written before them (the key only in
``details``), and the report's gradient-flow map of a real audit."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

import gradcheck
from gradcheck.api import format_failure
from gradcheck.core.results import (
    CheckResult,
    FlowStatus,
    KnownMark,
    ParameterFlow,
    Report,
    Status,
    SweepInfo,
    Triage,
)
from gradcheck.core.rules import NumpyFunction
from gradcheck.core.taxonomy import CheckKind
from gradcheck.report import html as report_html
from gradcheck.report import junit, model
from gradcheck.stream import StreamData, read_streams
from gradcheck.stream.fields import InvalidField, check_fields

FLOW = ParameterFlow("enc.weight", (2, 3), FlowStatus.BLOCKED_UNINTENTIONALLY, False, True, 0.0,
                     0.25, 1e-9, Status.SKIPPED, ("Tensor.item() at m.py:3",),
                     "'enc.weight': the loss depends on it", 0.0)


def _base(**kw) -> CheckResult:
    return CheckResult(kind=CheckKind.VJP, status=Status.FAILED, backend="numpy", name="f",
                       dtype="float32", actual=1.0, expected=1.5, discrepancy=0.5,
                       allowed=0.1, discrepancy_ratio=5.0, **kw)


TYPED = {
    "computed_in": _base(computed_in="float64"),
    "rounding_level": _base(rounding_level=4.4e-12),
    "flow": CheckResult(kind=CheckKind.FLOW, status=Status.FAILED, backend="torch",
                        name="enc.weight", message=FLOW.message, flow=FLOW),
    "sweep": CheckResult(kind=CheckKind.CALL, status=Status.SKIPPED, backend="jax",
                         name="jax.numpy.foo", sweep=SweepInfo(left_out="no float input: int")),
    "triage": _base(sweep=SweepInfo(point="edge", order=1, profile="quick", family="unary",
                                    repaired=0, oracle="check"),
                    triage=Triage("confirmed", "wrong value", "numpy|f|vjp|confirmed|wrong",
                                  {"fd": {"ad": 1.0, "fd_pow2": 1.5}}, "print('repro')")),
    "probe": _base(probe=1, probes=3),
    "alternative": _base(alternative="functional"),
    "localized": _base(localized="full Jacobian 3x3", max_abs_discrepancy=0.5,
                       max_rel_discrepancy=0.25, elements_over=2),
    "known_as": _base(known_as=KnownMark("the rule reuses the rounded output", "by_design",
                                         "https://example.org/issue/1")),
    "input_path": _base(input_index=0, input_path="params['w']"),
}
#: what a stream written before the typed fields carries in ``details`` instead
OLD_DETAILS = {"computed_in": {"computed_in": "float64"},
               "input_path": {"input_path": "params['w']"},
               "rounding_level": {"rounding_level": 4.4e-12},
               "flow": {"flow": "blocked unintentionally",
                        "cut_points": ["Tensor.item() at m.py:3"]},
               "sweep": {"sweep": {"left_out": "no float input: int"}},
               "probe": {"probe": 1, "probes": 3},
               "alternative": {"path": "functional"},
               "localized": {"localized": "full Jacobian 3x3", "max_abs_discrepancy": 0.5,
                             "max_rel_discrepancy": 0.25, "elements_over": 2},
               "known_as": {"known": "the rule reuses the rounded output",
                            "known_nature": "by_design",
                            "upstream": "https://example.org/issue/1"},
               "triage": {"triage": {"class": "confirmed", "symptom": "wrong value",
                                     "key": "numpy|f|vjp|confirmed|wrong",
                                     "evidence": {"fd": {"ad": 1.0, "fd_pow2": 1.5}},
                                     "reproducer": "print('repro')"}}}


NEW_FIELDS = ("computed_in", "rounding_level", "flow", "sweep", "triage", "probe", "probes",
              "alternative", "localized", "max_abs_discrepancy", "max_rel_discrepancy",
              "elements_over", "known_as")


def _old_line(field: str) -> str:
    """``TYPED[field]`` as a stream before the typed field wrote it: the key only in details."""
    data = json.loads(TYPED[field].to_json())
    for name in NEW_FIELDS:  # no typed field at all; ``to_json`` mirrored each in details
        data.pop(name, None)
    assert {k: data["details"][k] for k in OLD_DETAILS[field]} == OLD_DETAILS[field]
    return json.dumps(data)


@pytest.mark.parametrize("field", sorted(TYPED))
def test_a_typed_field_round_trips_through_json_and_is_mirrored_in_details(field):
    r = TYPED[field]
    back = CheckResult.from_json(r.to_json())
    assert getattr(back, field) == getattr(r, field) is not None and back == r
    data = json.loads(r.to_json())
    # readers of streams written before the field read it from details
    assert {k: data["details"][k] for k in OLD_DETAILS[field]} == OLD_DETAILS[field]
    assert data[field] is not None


@pytest.mark.parametrize("field", sorted(TYPED))
def test_a_typed_field_round_trips_through_the_stream_reader(field, tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(TYPED[field].to_json() + "\n" + _old_line(field) + "\n")
    data = read_streams([path])
    assert data.problems == []
    new, old = data.checks
    assert getattr(new, field) == getattr(TYPED[field], field)
    if field == "flow":  # an old stream has the status and the cut points, not the numbers
        assert (old.flow.name, old.flow.status, old.flow.cut_points) == (
            FLOW.name, FLOW.status, FLOW.cut_points)
        assert math.isnan(old.flow.ad_norm) and old.flow.message == FLOW.message
    else:
        assert getattr(old, field) == getattr(TYPED[field], field)


@pytest.mark.parametrize("field", sorted(TYPED))
def test_an_old_line_with_the_key_only_in_details_reads_into_the_field(field):
    old = CheckResult.from_json(_old_line(field))
    assert getattr(old, field) is not None
    if field in ("probe", "localized"):  # and the other fields of the same details
        assert old == TYPED[field]
    # details unchanged: the report's detail panel shows them as before
    assert {k: old.details[k] for k in OLD_DETAILS[field]} == OLD_DETAILS[field]


@pytest.mark.parametrize(("field", "value", "message"), [
    ("computed_in", 64, "computed_in: expected a string or null"),
    ("rounding_level", "low", "rounding_level: expected a number"),
    ("flow", [], "flow: expected an object"),
    ("flow", {**FLOW.to_dict(), "status": "sideways"}, "flow.status: expected one of"),
    ("flow", {**FLOW.to_dict(), "gradient_check": 1}, "flow.gradient_check: expected one of"),
    ("flow", {**FLOW.to_dict(), "ad_norm": "x"}, "flow.ad_norm: expected a number"),
    ("flow", {**FLOW.to_dict(), "trainable": "yes"}, "flow.trainable: expected a boolean"),
    ("flow", {**FLOW.to_dict(), "shape": ["2"]}, "flow.shape[0]: expected an integer"),
    ("flow", {**FLOW.to_dict(), "cut_points": [3]}, "flow.cut_points[0]: expected a string"),
    ("flow", {k: v for k, v in FLOW.to_dict().items() if k != "name"}, "name: missing"),
    ("probe", "1", "probe: expected an integer"),
    ("alternative", 3, "alternative: expected a string"),
    ("localized", [], "localized: expected a string"),
    ("localized", {}, "localized: expected a string"),
    ("sweep", [], "sweep: expected an object"),
    ("sweep", {"point": 3}, "point: expected a string"),
    ("sweep", {"order": "1"}, "sweep.order: expected an integer"),
    ("sweep", {"hung_s": "long"}, "sweep.hung_s: expected a number"),
    ("triage", "confirmed", "triage: expected an object"),
    ("triage", {"symptom": "x"}, "class: missing"),
    ("triage", {"class": "confirmed", "evidence": []}, "triage.evidence: expected an object"),
    ("known_as", "known", "known_as: expected an object"),
    ("known_as", {"known_nature": "bug"}, "known_as: expected an object with a 'known'"),
    ("known_as", {"known": 3}, "known: expected a string"),
])
def test_the_stream_reader_validates_the_typed_fields(field, value, message):
    data = json.loads(TYPED[field].to_json())
    data[field] = value
    with pytest.raises(InvalidField, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_fields(data)


def test_flow_numbers_inf_and_nan_round_trip():
    r = replace(TYPED["flow"], flow=replace(FLOW, fd_dependence=math.inf))
    data = check_fields(json.loads(r.to_json()))
    back = CheckResult.from_dict(data)
    assert back.flow.fd_dependence == math.inf and back.flow.status is FLOW.status


def test_the_consumers_read_the_fields():
    r = _base(computed_in="float64", rounding_level=4.4e-12)
    text = format_failure(Report([r]))
    assert "dtype=float32 (checked in float64)" in text
    assert "at the rounding level: |difference| within 4.4e-12" in text
    from gradcheck.sweep.triage import _rounding_level

    assert _rounding_level(r) and not _rounding_level(_base())
    r = _base(probe=1, probes=3, localized="full Jacobian 3x3", max_abs_discrepancy=0.5,
              max_rel_discrepancy=0.25, elements_over=2)
    text = format_failure(Report([r]))
    assert "(probe 2 of 3)" in text
    assert ("largest element difference (full Jacobian 3x3): 0.5, relative 0.25, 2 element(s) "
            "over the allowed error") in text
    xml = junit.render(StreamData(checks=[_base(alternative="functional")])).decode()
    assert "(functional)" in xml


def test_check_writes_computed_in_as_the_field():
    # a float32 rule whose VJP is 1% off: judged in float64, the comparison says so
    wrong = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]) * np.float32(1.01),),
                          name="sin")
    report = gradcheck.check(wrong, np.linspace(0.1, 1, 7, dtype=np.float32), backend="numpy")
    r = next(r for r in report if r.kind is CheckKind.VJP)
    assert r.status is Status.FAILED
    assert r.computed_in == r.details["computed_in"] == "float64"


# -- the report's gradient-flow map of a real audit ---------------------------------------------

def _audited(tmp_path):
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.fc = torch.nn.Linear(3, 2, dtype=torch.float64)
            self.scale = torch.nn.Parameter(torch.rand(2, generator=g, dtype=torch.float64) + 1)
            self.frozen = torch.nn.Parameter(torch.rand(2, generator=g, dtype=torch.float64),
                                             requires_grad=False)
            self.unused = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))

        def forward(self, x):
            return self.fc(x) * self.scale.detach() + self.frozen  # BUG: scale detached

    def loss_fn(m, batch):
        return (m(batch) ** 2).sum()

    batch = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(4, 3)
    report = gradcheck.audit(Model(), loss_fn, batch, backend="torch",
                             stop_gradient=("frozen",))
    path = tmp_path / "results.jsonl"
    path.write_text(report.to_jsonl())
    data = read_streams([path])
    assert data.problems == []
    return report, data


def test_the_report_shows_each_audited_parameter_in_the_flow_map(tmp_path):
    report, data = _audited(tmp_path)
    want = {p.name: p.status for p in report.parameters}
    assert set(want) == {"fc.weight", "fc.bias", "scale", "frozen", "unused"}
    assert want["fc.weight"] is FlowStatus.FLOWS
    assert want["scale"] is FlowStatus.BLOCKED_UNINTENTIONALLY
    assert want["frozen"] is FlowStatus.BLOCKED_AS_INTENDED
    assert want["unused"] is FlowStatus.UNUSED
    # the audit writes each parameter's record on its flow result; the stream keeps it
    flows = [r.flow for r in data.checks if r.flow is not None]
    numbers = [(p.name, p.status, p.ad_norm, p.fd_dependence, p.fd_noise, p.gradient_check)
               for p in report.parameters]
    assert [(p.name, p.status, p.ad_norm, p.fd_dependence, p.fd_noise, p.gradient_check)
            for p in flows] == numbers
    (fm,) = model.flow_maps(data.checks)
    assert {n: s for n, s, _ in fm.parameters} == {n: s.value for n, s in want.items()}
    page = report_html.render(data)
    section = page[page.index('id="flow"'):]
    section = section[:section.index("</section>")]
    assert "no per-parameter records" not in section
    for name, status in want.items():
        assert f"<span>{name}</span><b>{status.value}</b>" in section
    assert 'class="param fl-blocked_unintentionally"' in section
    # audited parameters are not ops of the matrix (the audit's gradient checks are named by
    # the parameter), in the page or in the matrix model
    assert not set(want) & set(model.build_matrix(data.checks).ops)


def test_an_audit_stream_written_before_the_flow_field_still_maps(tmp_path):
    _, data = _audited(tmp_path)
    old = []
    for r in data.checks:
        line = json.loads(r.to_json())
        line.pop("flow")
        old.append(CheckResult.from_json(json.dumps(line)))
    (fm,) = model.flow_maps(old)
    assert [n for n, _, _ in fm.parameters] == [r.flow.name for r in data.checks if r.flow]
    assert page_has_flow(report_html.render(StreamData(checks=old)))


def page_has_flow(page: str) -> bool:
    return 'id="flow"' in page and "<span>scale</span><b>blocked unintentionally</b>" in page


def test_the_sweep_findings_read_the_sweep_and_triage_fields():
    from gradcheck.sweep.triage import findings

    new = TYPED["triage"]
    old = CheckResult.from_json(_old_line("triage"))
    # classified again from the stored evidence by the current rules, the same either way
    (a,), (b,) = findings([new]), findings([old])
    assert (a.cls, a.key, a.points, a.reproducer) == (b.cls, b.key, b.points, b.reproducer)
    assert a.points == ("edge",) and a.reproducer == "print('repro')"
    assert a.key.startswith("numpy|f|") and a.cls in a.key
    assert a.evidence == b.evidence == {"fd": {"ad": 1.0, "fd_pow2": 1.5}}
    left = [TYPED["sweep"], CheckResult.from_json(_old_line("sweep"))]
    page = report_html.render(StreamData(checks=left))
    assert "Left out of the inventory" in page and "<td>no float input</td><td>2</td>" in page


def test_a_replaced_record_keeps_details_in_step():
    r = TYPED["triage"]
    over = replace(r, sweep=replace(r.sweep, overruled="resolution checks passed"))
    assert over.details["sweep"]["overruled"] == "resolution checks passed"
    assert CheckResult.from_json(over.to_json()).sweep.overruled == "resolution checks passed"


def test_a_documented_backend_behaviour_is_known_as_one_and_junit_reads_the_field():
    old = CheckResult(kind=CheckKind.SEMANTIC, status=Status.FAILED, backend="torch",
                      name="accumulation.second_backward",
                      details={"known_behaviour": "torch adds into .grad"})
    assert old.known and old.known_as == KnownMark("torch adds into .grad", "by_design", None,
                                                   True)
    back = CheckResult.from_json(old.to_json())
    assert back.known_as == old.known_as and back.details["known_behaviour"]
    fresh = replace(old, details={}, known_as=None)
    assert not fresh.known  # no mark, no known discrepancy: a failure like any other
    xml = junit.render(StreamData(checks=[old, fresh])).decode()
    assert "known discrepancy: torch adds into .grad" in xml
    assert xml.count("<failure") == 1


def test_the_sweep_marks_a_known_result_through_the_field():
    from gradcheck.sweep import known

    entry = next(k for k in known.KNOWN if k.link)
    mark = entry.mark()
    assert (mark.reason, mark.nature, mark.link, mark.behaviour) == (
        entry.reason, entry.nature, entry.link, False)
    r = _base(known_as=mark)
    assert r.known and r.details["known"] == entry.reason
    assert r.details["upstream"] == entry.link
