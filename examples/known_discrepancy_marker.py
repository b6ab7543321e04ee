"""Expected gradient failures in a CI gate: an ``xfail(raises=GradientMismatch)``, a
``pytest.raises`` around ``assert_gradients`` and a declared known discrepancy
(``@pytest.mark.gradcheck_known``) count as expected in pytest, in gradcheck's ``junit.xml``,
in the report's counts and in ``gradcheck report``'s exit status; a failure nothing expects
fails all four.

Run ``python -m examples.known_discrepancy_marker``: it runs this file's tests with pytest and
a report directory, then ``gradcheck report`` on the stream, and prints what each says.  (Or
run the tests yourself: ``pytest examples/known_discrepancy_marker.py -p gradcheck.pytest_plugin
--gradcheck-report-dir=reports``.)
"""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch, NumpyFunction

# sin with a hand-written backward that is 1% off (the "upstream bug"), and the correct one
OFF_BY_1_PERCENT = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]) * 1.01,),
                                 name="vendor_sin")
CORRECT = NumpyFunction(np.sin, lambda a, c: (c[0] * np.cos(a[0]),), name="my_sin")
X = np.linspace(0.1, 1.0, 4)


@pytest.mark.gradcheck_known(reason="vendor_sin's backward is 1% off",
                             link="https://example.org/vendor/issues/17")
def test_vendor_sin_known():
    gradcheck.assert_gradients(OFF_BY_1_PERCENT, X, backend="numpy")


@pytest.mark.xfail(raises=GradientMismatch, strict=True)
def test_vendor_sin_xfail():
    gradcheck.assert_gradients(OFF_BY_1_PERCENT, X, backend="numpy")


def test_vendor_sin_is_caught():
    with pytest.raises(GradientMismatch):
        gradcheck.assert_gradients(OFF_BY_1_PERCENT, X, backend="numpy")


def test_my_sin():
    gradcheck.assert_gradients(CORRECT, X, backend="numpy")


def main() -> None:
    import subprocess
    import sys
    import tempfile
    import xml.etree.ElementTree as ET
    from pathlib import Path

    from gradcheck.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        reports = Path(tmp) / "reports"
        proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p",
                               "no:cacheprovider", "-p", "gradcheck.pytest_plugin",
                               f"--gradcheck-report-dir={reports}"],
                              capture_output=True, text=True, cwd=Path(__file__).parents[1])
        print(f"pytest exit status {proc.returncode}: {proc.stdout.splitlines()[-1]}")
        junit = ET.parse(reports / "junit.xml").getroot()
        print("gradcheck junit.xml: " + ", ".join(
            f"{k} {junit.get(k)}" for k in ("tests", "failures", "errors", "skipped")))
        for case in junit.iter("testcase"):
            skipped = case.find("skipped")
            if skipped is not None and "known discrepancy" in skipped.get("message", ""):
                print(f"  {case.get('name').split(' [')[0]}: {skipped.get('message')}")
                break
        print("gradcheck report:")
        code = cli(["report", str(reports / "results.jsonl"), "-o", str(Path(tmp) / "again")])
        print(f"gradcheck report exit status {code}")


if __name__ == "__main__":
    main()
