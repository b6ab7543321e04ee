"""``gradcheck model``: the model protocol from the command line, both directions (gradcheck
starts the program; the program starts ``gradcheck model --peer-stdio``), exit codes 0/1/2, the
report folder (results stream, index.html, junit.xml) and ``--junit``."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from gradcheck.stream import read_streams
from tests.support.child_env import child_env

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "tests" / "support" / "model_peer.py"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradcheck", "model", *args], cwd=cwd,
                          env=child_env(), capture_output=True, text=True, timeout=300)


def command(variant: str) -> str:
    return f"{sys.executable} {PEER} --variant {variant}"


def test_correct_model_exits_0_and_writes_the_report(tmp_path):
    junit = tmp_path / "out" / "model.xml"
    proc = cli("--command", command("correct"), "--report-dir", str(tmp_path / "r"),
               "--junit", str(junit), "--dtype", "float64", "--directions", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fc1.weight" in proc.stdout and "flows" in proc.stdout
    for name in ("results.jsonl", "index.html", "junit.xml"):
        assert (tmp_path / "r" / name).is_file()
    data = read_streams([tmp_path / "r" / "results.jsonl"])
    names = {r.name for r in data.checks}
    assert {"rng.determinism", "names", "flow[fc1.weight]", "grad[fc1.weight]",
            "grad.global[1]"} <= names
    cases = {c.get("name") for c in ET.parse(junit).getroot().iter("testcase")}
    assert any("flow[fc1.weight]" in (c or "") for c in cases)


def test_a_finding_exits_1(tmp_path):
    proc = cli("--command", command("absent_grad"), "--report-dir", str(tmp_path / "r"),
               "--no-step", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "BLOCKED: absent from the store" in proc.stdout
    assert "every fc1.*; none of fc2.*, fc3.*" in proc.stdout
    # the HTML report carries the flow table's information: status and evidence per tensor
    page = (tmp_path / "r" / "index.html").read_text()
    section = page[page.index('id="flow"'):]
    section = section[:section.index("</section>")]
    for name, status in (("fc1.weight", "blocked_unintentionally"), ("fc2.weight", "flows")):
        assert (f'<tr><td class="mono">{name}</td><td class="flowcell fl-{status}">'
                in section)
    assert "absent from the gradient store" in section and "FD check passed" in section


def test_a_program_that_cannot_answer_exits_2(tmp_path):
    proc = cli("--command", command("crash_on_line"), "--report-dir", str(tmp_path / "r"),
               "--no-step", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "exit code 101" in proc.stdout
    # the results before the crash are in the stream
    data = read_streams([tmp_path / "r" / "results.jsonl"])
    assert any(r.name == "rng.determinism" and r.status.value == "passed" for r in data.checks)


def test_usage_errors_exit_2(tmp_path):
    assert cli("--report-dir", str(tmp_path), cwd=tmp_path).returncode == 2
    proc = cli("--command", command("correct"), "--param", "conv*", "--report-dir",
               str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 2 and "names no tensor" in proc.stderr


def test_the_program_starts_gradcheck_over_stdio(tmp_path):
    """The library's direction: the user's program runs ``python -m gradcheck model
    --peer-stdio`` with GRADCHECK_ARGS, answers on that child's pipes and returns its code."""
    env = child_env()
    env.pop("GRADCHECK_PROTOCOL", None)
    env["GRADCHECK_ARGS"] = f"--no-step --dtype float64 --report-dir {tmp_path / 'r'}"
    ok = subprocess.run([sys.executable, str(PEER), "--variant", "correct"], cwd=tmp_path,
                        env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == ""  # the harness's report went to stderr
    assert "fc1.weight" in ok.stderr and "GRADCHECK_ARGS=" in ok.stderr
    bad = subprocess.run([sys.executable, str(PEER), "--variant", "wrong_grad"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    assert "grad[fc2.weight]" in bad.stderr
    assert os.path.isfile(tmp_path / "r" / "index.html")
