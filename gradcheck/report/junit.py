"""JUnit XML for CI systems: one ``testcase`` per check (and per test that failed outside any
check), grouped in one ``testsuite`` per (backend, device, dtype).

Failed checks become ``<failure>``, errors ``<error>``, skipped and inconclusive checks
``<skipped>`` (inconclusive: the oracle could not decide; nothing wrong was shown).  The text of
a failure says what was compared, both values, the allowed error and its source, the ratio, the
worst elements and the reproducer.  Characters XML 1.0 cannot carry are replaced (lone
surrogates written as escapes).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

from gradcheck._reproducer import heading
from gradcheck.core.results import CheckResult, Status, number, shorten, shown, shown_element
from gradcheck.report import model
from gradcheck.stream import StreamData, TestOutcome
from gradcheck.stream.reader import well_formed

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: object) -> str:
    """Text XML 1.0 can carry: forbidden characters replaced, lone surrogates (a name from a
    stream, the bytes of a file name) written as escapes."""
    return _INVALID_XML.sub("\ufffd", well_formed(text))


def failure_text(r: CheckResult) -> str:
    """The multi-line evidence of one check."""
    lines = [f"{r.subject} of {r.name} [{r.status.value}] backend={r.backend} device={r.device} "
             f"dtype={r.dtype} seed={r.seed} shapes={list(map(list, r.shapes))}"]
    if r.message:
        lines.append(r.message)
    values = shown(r)  # the strings of the assert message and the HTML detail panel
    if values is not None:
        lines.append(f"AD (backend) {values.actual} vs oracle {values.expected}; |diff| "
                     f"{values.difference}, relative {values.relative}")
    if r.allowed is not None:
        lines.append(f"allowed {number(r.allowed)} from {r.allowed_source}; ratio "
                     f"{number(r.discrepancy_ratio)}")
    for w in r.worst:
        ad, oracle, diff, allowed, ratio = shown_element(w)
        lines.append(f"  element {w.index}: AD {ad} vs oracle {oracle}, |diff| {diff} "
                     f"(allowed {allowed}, ratio {ratio})")
    if r.test_id:
        lines.append(f"test: {r.test_id}")
    if r.reproducer:
        lines.append(f"{heading(r.reproducer)}:\n{r.reproducer}")
    return "\n".join(lines)


def _case(suite: ET.Element, classname: str, name: str, seconds: float | None) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=_clean(classname), name=_clean(name),
                         time=f"{seconds or 0.0:.6f}")


def _check_case(suite: ET.Element, r: CheckResult) -> None:
    name = f"{r.name}: {r.subject}" + (f" ({r.alternative})" if r.alternative is not None
                                       else "")
    if r.test_id:
        name += f" [{r.test_id}]"
    case = _case(suite, f"gradcheck.{r.backend}.{r.device}.{r.dtype}", name, r.duration_s)
    short = shorten(_clean(r.message.splitlines()[0] if r.message else r.status.value), 500)
    if model.is_known(r):  # an expected failure (recorded known discrepancy): not a new one
        reason = r.known_as.reason if r.known_as is not None else None
        ET.SubElement(case, "skipped", message=shorten(_clean(f"known discrepancy: {reason}"),
                                                       500))
    elif r.status is Status.FAILED:
        ET.SubElement(case, "failure", message=short, type="GradientDiscrepancy").text = _clean(
            failure_text(r))
    elif r.status is Status.ERROR:
        ET.SubElement(case, "error", message=short, type="CheckError").text = _clean(
            failure_text(r))
    elif r.status in (Status.SKIPPED, Status.INCONCLUSIVE):
        ET.SubElement(case, "skipped", message=_clean(f"{r.status.value}: {short}"))


def _test_case(suite: ET.Element, t: TestOutcome) -> None:
    case = _case(suite, "pytest", t.test_id, t.duration_s)
    tag = "error" if t.outcome == "error" else "failure"
    ET.SubElement(case, tag, message=_clean(f"test {t.outcome} outside any check"),
                  type="TestFailure").text = _clean(t.message)


def render(data: StreamData) -> bytes:
    """The JUnit XML document (UTF-8, with declaration) for ``data``."""
    root = ET.Element("testsuites", name="gradcheck")
    groups: dict[tuple[str, str, str], list[CheckResult]] = defaultdict(list)
    for r in data.checks:
        groups[(r.backend, r.device, r.dtype)].append(r)
    totals: defaultdict[str, int] = defaultdict(int)
    for (backend, device, dtype), results in sorted(groups.items()):
        suite = ET.SubElement(root, "testsuite", name=_clean(f"gradcheck {backend} {device} "
                                                             f"{dtype}"))
        for r in results:
            _check_case(suite, r)
        _attributes(suite, results, totals)
    outside = model.failed_tests_without_checks(data)
    if outside:
        suite = ET.SubElement(root, "testsuite", name="pytest (failures outside checks)")
        for t in outside:
            _test_case(suite, t)
        n_err = sum(t.outcome == "error" for t in outside)
        _set(suite, len(outside), len(outside) - n_err, n_err, 0,
             sum(t.duration_s for t in outside), totals)
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(totals[key]))
    root.set("time", f"{totals['time_us'] / 1e6:.6f}")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _attributes(suite: ET.Element, results: list[CheckResult], totals: dict) -> None:
    st = [model.status_of(r) for r in results]
    _set(suite, len(st), st.count("failed"), st.count("error"),
         st.count("skipped") + st.count("inconclusive") + st.count(model.KNOWN),
         sum(r.duration_s or 0.0 for r in results), totals)


def _set(suite, tests, failures, errors, skipped, seconds, totals) -> None:
    for key, v in (("tests", tests), ("failures", failures), ("errors", errors),
                   ("skipped", skipped)):
        suite.set(key, str(v))
        totals[key] += v
    suite.set("time", f"{seconds:.6f}")
    totals["time_us"] += int(seconds * 1e6)
