"""``gradcheck run`` and ``gradcheck report`` under what users do: selections that match nothing,
signals, two runs into one folder, unusable report directories, closed pipes, hostile names."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gradcheck import stream
from gradcheck.cli import _parser, main
from gradcheck.plugin.session_report import LOCK_NAME, summary_lines
from gradcheck.report import write_report
from gradcheck.stream import StreamData
from gradcheck.stream.reader import terminal_safe
from tests.support import process_tree
from tests.support.child_env import child_env as _env
from tests.support.child_env import gradcheck_cli
from tests.support.process_tree import needs_proc
from tests.support.report_data import numpy_results

ROOT = Path(__file__).resolve().parents[2]

#: checks one rule per test, then sleeps (GC_SLEEP seconds, default 60): a run to interrupt
SLOW_SUITE = '''
import os, time
import numpy as np
import pytest
import gradcheck
from gradcheck import NumpyFunction

@pytest.mark.parametrize("k", range(4))
def test_slow(k):
    fn = NumpyFunction(forward=np.sin, vjp=lambda a, c: (np.cos(a[0]) * c[0],), name=f"sin{k}")
    gradcheck.assert_gradients(fn, np.ones(3), backend="numpy")
    time.sleep(float(os.environ.get("GC_SLEEP", "60")))
'''



@pytest.fixture(scope="module")
def slow_suite(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("slow")
    (path / "test_slow.py").write_text(SLOW_SUITE)
    return path


def _start_run(suite: Path, out: Path, *extra: str, sleep: str = "60") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gradcheck.cli", "run", "--suites", str(suite), "--report-dir",
         str(out), *extra], cwd=suite, env=_env(GC_SLEEP=sleep), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _wait_for_a_check(out: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(b'"record": "check"' in p.read_bytes() for p in out.glob("*.jsonl")):
            return
        if proc.poll() is not None:
            pytest.fail("the run ended early:\n" + "".join(proc.communicate()))
        time.sleep(0.1)
    proc.kill()
    pytest.fail("no check result reached the stream")


# -- A: a selection that plans no numeric check --------------------------------------------


def test_an_op_or_dtype_that_matches_nothing_is_a_usage_error_before_pytest(capsys):
    suites = str(ROOT / "suites")
    assert main(["run", "--op", "no_such_op", "--suites", suites]) == 2
    err = capsys.readouterr().err
    assert "--op 'no_such_op' matches no catalog op" in err and "gradcheck ops" in err
    assert "gradcheck run: pytest" not in capsys.readouterr().out  # pytest never started
    assert main(["run", "--dtype", "float128", "--backend", "numpy", "--suites", suites]) == 2
    err = capsys.readouterr().err
    assert "--dtype 'float128' is not a dtype of any selected backend" in err
    assert "numpy: float64, float32, float16" in err
    # a glob and a substring that do match go through validation
    from gradcheck.cli import _validate_selection

    _validate_selection(argparse.Namespace(op=["tan*", "atan"], dtype=["float32"],
                                           backend=["numpy"]))


@pytest.mark.parametrize("jobs", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_the_plugin_refuses_a_selection_that_plans_no_numeric_check(jobs, tmp_path):
    def pytest_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", str(ROOT / "suites"), "-q", "-p",
             "no:cacheprovider", "--gradcheck-backend", "numpy", *jobs, *args],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)

    # numpy declares float16, but no catalog op is checked in it: nothing would be checked
    proc = pytest_run("--gradcheck-dtype", "float16", "--co")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("plans no numeric check: no selected op is defined for dtype 'float16'"
            in proc.stdout + proc.stderr)
    # every planned case skipped (an absent device) is nothing checked too
    proc = pytest_run("--gradcheck-device", "cuda", "--gradcheck-op", "tanh", "--co")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "every planned case is skipped: device 'cuda' not available" in (proc.stdout
                                                                             + proc.stderr)
    if not jobs:  # a normal selection still collects (xdist: the same plan)
        proc = pytest_run("--gradcheck-op", "tanh", "--co")
        assert proc.returncode == 0 and "test_vjp[numpy-cpu-float64-tanh]" in proc.stdout


def test_gradcheck_run_reports_the_plugins_refusal_as_a_usage_error(tmp_path):
    proc = gradcheck_cli("run", "--backend", "numpy", "--dtype", "float16", "--report-dir",
                         str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "no selected op is defined for dtype 'float16'" in proc.stdout + proc.stderr
    assert "report written" not in proc.stdout


# -- B: signals ------------------------------------------------------------------------------


@pytest.mark.parametrize("sig, code, jobs", [(signal.SIGTERM, 143, ("-j", "2")),
                                             (signal.SIGINT, 130, ())],
                         ids=["sigterm-xdist", "sigint-serial"])
def test_a_signal_stops_the_run_and_the_report_keeps_what_finished(slow_suite, tmp_path, sig,
                                                                   code, jobs):
    out = tmp_path / "out"
    proc = _start_run(slow_suite, out, *jobs)
    _wait_for_a_check(out, proc)
    sent = time.monotonic()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    stopped_after = time.monotonic() - sent
    assert proc.returncode == code, stdout[-3000:] + stderr[-3000:]
    assert stopped_after < 30, stopped_after  # the 60 s sleeps were interrupted
    assert f"interrupted by {signal.Signals(sig).name}" in stderr
    assert f"the report of what finished is {(out / 'index.html').resolve()}" in stderr
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "junit.xml", "results.jsonl"]
    data = stream.read_streams([out])
    assert data.checks and {c.name for c in data.checks} <= {f"sin{k}" for k in range(4)}
    html = (out / "index.html").read_text()
    assert all(c.name in html for c in data.checks)  # the rebuilt report holds them
    if jobs:  # the workers' files were merged
        roles = {r.environment.get("role") for r in data.runs.values()}
        assert {"gw0", "gw1"} <= roles, roles


def _start_run_alone(suite: Path, out: Path, *extra: str) -> subprocess.Popen:
    """``gradcheck run`` in a session of its own, so that what it leaves can be found."""
    return subprocess.Popen(
        [sys.executable, "-m", "gradcheck.cli", "run", "--suites", str(suite), "--report-dir",
         str(out), *extra], cwd=suite, env=_env(GC_SLEEP="60"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


@needs_proc
@pytest.mark.parametrize("jobs", [("-j", "2"), ()], ids=["xdist", "serial"])
def test_sighup_stops_the_run_like_sigterm_and_leaves_no_process(slow_suite, tmp_path, jobs):
    """A closed terminal or a cancelled CI job (SIGHUP): pytest and its workers are stopped,
    the report of what streamed is written, the exit status is 129, and nothing of the run's
    session is left (before, SIGHUP killed gradcheck alone: no report, workers went on)."""
    out = tmp_path / "out"
    proc = _start_run_alone(slow_suite, out, *jobs)
    try:
        _wait_for_a_check(out, proc)
        proc.send_signal(signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        survivors = process_tree.in_session(proc.pid)
    process_tree.kill_all(survivors)
    assert proc.returncode == 129, stdout[-3000:] + stderr[-3000:]
    assert "interrupted by SIGHUP" in stderr
    assert (out / "index.html").is_file() and (out / "junit.xml").is_file()
    assert stream.read_streams([out]).checks
    assert not survivors, f"processes {survivors} of the run survived SIGHUP"


@needs_proc
def test_a_sigkilled_run_leaves_no_pytest_and_no_worker(slow_suite, tmp_path):
    """SIGKILL cannot be handled: pytest dies with gradcheck and each xdist worker with pytest
    (before, both went on running, orphaned, until their tests ended)."""
    out = tmp_path / "out"
    proc = _start_run_alone(slow_suite, out, "-j", "2")
    try:
        _wait_for_a_check(out, proc)
        tree = process_tree.descendants(proc.pid)
        assert len(tree) >= 3, tree  # pytest and its two workers
        proc.kill()
        proc.wait(timeout=60)  # (not communicate: survivors would hold its pipes open)
        process_tree.assert_gone(tree, "after SIGKILL to gradcheck run")
        process_tree.assert_session_empty(proc.pid, "after SIGKILL to gradcheck run")
    finally:
        if proc.poll() is None:
            proc.kill()
        process_tree.kill_all(process_tree.in_session(proc.pid))


@needs_proc
def test_more_signals_during_shutdown_do_not_change_the_outcome(slow_suite, tmp_path):
    """The first Ctrl-C starts the shutdown; Ctrl-C, SIGTERM and SIGHUP sent after it, until
    gradcheck exits, only hurry it: the exit status is still 130 and the report is written
    (before, one arriving while the report was written killed gradcheck or ended it without
    a report)."""
    out = tmp_path / "out"
    proc = _start_run_alone(slow_suite, out, "-j", "2")
    try:
        _wait_for_a_check(out, proc)
        proc.send_signal(signal.SIGINT)
        more = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        k = 0
        while proc.poll() is None and k < 5000:
            try:
                os.kill(proc.pid, more[k % 3])
            except ProcessLookupError:
                break
            k += 1
            time.sleep(0.01)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        survivors = process_tree.in_session(proc.pid)
    process_tree.kill_all(survivors)
    assert proc.returncode == 130, (proc.returncode, stdout[-3000:] + stderr[-3000:])
    assert "interrupted by SIGINT" in stderr
    assert "the report of what finished is" in stderr, stderr[-3000:]
    assert (out / "index.html").is_file()
    assert not survivors, f"processes {survivors} of the run survived"


# -- C: two runs into one folder -------------------------------------------------------------


def test_a_second_concurrent_run_into_the_same_folder_is_refused(slow_suite, tmp_path):
    out = tmp_path / "out"
    first = _start_run(slow_suite, out, "--", "-k", "test_slow[0] or test_slow[1]", sleep="10")
    try:
        _wait_for_a_check(out, first)
        before = (out / "results.jsonl").read_bytes()
        second = gradcheck_cli("run", "--suites", str(slow_suite), "--report-dir", str(out),
                               cwd=slow_suite)
        assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
        assert "is in use by another gradcheck run (pid " in second.stderr
        assert f"pid {first.pid}" not in second.stderr  # the lock is pytest's, not the CLI's
        # pytest itself (without the CLI's early check) refuses too
        direct = subprocess.run(
            [sys.executable, "-m", "pytest", str(slow_suite), "-q", "-p", "no:cacheprovider",
             f"--gradcheck-report-dir={out}"], cwd=slow_suite, env=_env(GC_SLEEP="0"),
            capture_output=True, text=True, timeout=300)
        assert direct.returncode == 4, direct.stdout[-2000:] + direct.stderr[-2000:]
        assert "in use by another gradcheck run" in direct.stderr
        assert (out / "results.jsonl").read_bytes().startswith(before)  # nothing was deleted
    finally:
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stdout[-2000:] + stderr[-2000:]
    first_data = stream.read_streams([out])
    assert len({t.test_id for t in first_data.tests}) == 2 and first_data.problems == []
    assert not (out / LOCK_NAME).exists()
    # a sequential rerun replaces the previous results
    again = subprocess.run(
        [sys.executable, "-m", "gradcheck.cli", "run", "--suites", str(slow_suite),
         "--report-dir", str(out), "--", "-k", "test_slow[3]"], cwd=slow_suite,
        env=_env(GC_SLEEP="0"), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    ids = {t.test_id.split("::")[-1] for t in stream.read_streams([out]).tests}
    assert ids == {"test_slow[3]"}


# -- F: report directories -------------------------------------------------------------------


def test_an_unusable_report_directory_is_a_one_line_usage_error(tmp_path, capsys):
    afile = tmp_path / "somefile"
    afile.write_text("not a directory")
    suites = str(ROOT / "suites")
    for target in (afile, afile / "sub"):
        assert main(["run", "--report-dir", str(target), "--suites", suites]) == 2
        captured = capsys.readouterr()
        assert "gradcheck run: pytest" not in captured.out  # before pytest starts
        (line,) = captured.err.strip().splitlines()
        assert f"--report-dir {str(target)!r}" in line and "is a file, not a directory" in line
    good = tmp_path / "s.jsonl"
    good.write_text("".join(r.to_json() + "\n" for r in numpy_results()[:3]))
    assert main(["report", str(good), "-o", str(afile / "sub")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"-o/--output {str(afile / 'sub')!r}" in line and "is a file" in line


# -- E: terminal hygiene ---------------------------------------------------------------------

EVIL = "op\x1b[31mred\rover\u202e"


def test_names_from_the_stream_print_with_visible_escapes(tmp_path, capsys):
    assert terminal_safe(EVIL) == "op\\x1b[31mred\\rover\\u202e"
    assert terminal_safe("plain é ∂ name") == "plain é ∂ name"
    from dataclasses import replace

    bad = next(r for r in numpy_results() if not r.ok)
    evil = replace(bad, name=EVIL, backend="numpy\x1b]0;title\x07")
    lines: list[str] = []
    summary_lines(write_report(StreamData(checks=[evil]), tmp_path / "r"), lines.append)
    text = "\n".join(lines)
    assert "op\\x1b[31mred\\rover\\u202e" in text and "numpy\\x1b]0;title\\x07" in text
    assert not any(c in text for c in "\x1b\r\x07\u202e")
    # `gradcheck report` warnings: a malformed line's excerpt
    stream_file = tmp_path / "s.jsonl"
    stream_file.write_text(bad.to_json() + "\n{" + EVIL + "\n")
    assert main(["report", str(stream_file), "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "malformed JSON" in err and "\\x1b[31m" in err and "\x1b" not in err
    # a kind that is no CheckKind is an invalid record, its text escaped in the warning
    record = json.loads(bad.to_json())
    stream_file.write_text(json.dumps({**record, "kind": "vjp\x1b[2J"}) + "\n")
    assert main(["report", str(stream_file), "-o", str(tmp_path / "o2")]) == 2  # none left
    err = capsys.readouterr().err
    assert "invalid check record" in err and "is not a check kind" in err and "\x1b" not in err


def test_backends_listing_escapes_adapter_text(capsys, monkeypatch):
    desc = {"name": EVIL, "version": "1\r2", "devices": ["cpu\x1b[0m"], "dtypes": ["float64"],
            "supports_jvp": True, "supports_order2": False,
            "semantics": {"accumulation": "functional", "notes": "n\x1bote"}}
    monkeypatch.setattr("gradcheck.cli.installed_backends", lambda: ["x"])
    monkeypatch.setattr("gradcheck.cli.get_backend", lambda name: object())
    monkeypatch.setattr("gradcheck.stream.environment.describe_backend", lambda be: dict(desc))
    assert main(["backends", "--probe"]) == 0
    out = capsys.readouterr().out
    assert "op\\x1b[31mred\\rover\\u202e 1\\r2" in out and "cpu\\x1b[0m" in out
    assert "n\\x1bote" in out and "\x1b" not in out and "\r" not in out


def test_a_closed_pipe_ends_quietly_with_141():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line (like `| head -0`)
    try:
        proc = subprocess.run([sys.executable, "-m", "gradcheck.cli", "ops"], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, env=_env(), timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141
    assert proc.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"


def test_every_option_says_its_default_and_help_is_plain_text(capsys):
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == {"run", "sweep", "report", "backends", "ops", "model"}
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            assert action.help and "default" in action.help, (name, action.option_strings)
        assert main([name, "--help"]) == 0
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for markup in ("``", "\n* ", ":func:", ":mod:"):
        assert markup not in text, markup
    assert "exit codes:" in text and "130" in text and "143" in text


def test_an_interrupted_sweep_writes_the_report_of_what_finished(tmp_path, capsys):
    """What the CLI does after the signal: the stream and the workers' streams on disk become
    the report (the files stay for --resume), and the exit status says which signal."""
    import signal

    from gradcheck import stream
    from gradcheck.cli import _sweep_interrupted
    from gradcheck.core.results import CheckResult, Status

    with stream.using(tmp_path / "results.sweep0.jsonl"):
        stream.record(CheckResult(kind="vjp", status=Status.PASSED, backend="jax",
                                  dtype="float64", name="jax.numpy.sin"))
    assert _sweep_interrupted(tmp_path, signal.SIGTERM) == 143
    assert "jax.numpy.sin" in (tmp_path / "index.html").read_text()
    assert (tmp_path / "results.sweep0.jsonl").exists()
    assert "--resume" in capsys.readouterr().err


# -- F: `gradcheck report` on hostile inputs -------------------------------------------------


def _shard(path: Path, results) -> Path:
    with stream.using(path) as s:
        for r in results:
            s.record(r)
    return path


def test_report_names_each_missing_input_once_and_reports_the_rest(tmp_path, capsys):
    """A missing file in `gradcheck report A B C` used to abort the whole merge (naming the
    file as often as it was given): now the others are reported and the exit is non-zero."""
    results = numpy_results()
    a = _shard(tmp_path / "a.jsonl", results[:3])
    c = _shard(tmp_path / "c.jsonl", results[3:6])
    missing = tmp_path / "b.jsonl"
    out = tmp_path / "out"
    assert main(["report", str(a), str(missing), str(c), str(missing), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count(str(missing)) == 1 and "no such file" in err
    page = (out / "index.html").read_text()
    assert "6 checks" in page and "b.jsonl: no such file or directory" in page
    assert ": incomplete</title>" in page  # six passed, but one shard is missing
    # nothing readable at all: an error, and the report already in the folder is kept
    assert main(["report", str(missing), "-o", str(out)]) == 2
    assert "no input could be read" in capsys.readouterr().err
    assert (out / "index.html").read_text() == page


def test_report_of_a_future_schema_stream_is_marked_and_not_a_pass(tmp_path, capsys):
    """A stream of `"schema": 99` used to be merged silently, exit 0."""
    passed = [r for r in numpy_results() if r.ok][:3]
    good = _shard(tmp_path / "good.jsonl", passed)
    future = tmp_path / "future.jsonl"
    future.write_text("".join(json.dumps({**json.loads(line), "schema": 99}) + "\n"
                              for line in _shard(tmp_path / "f.src", passed).read_text()
                              .splitlines()))
    out = tmp_path / "out"
    assert main(["report", str(good), str(future), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{future}:1:" in err and "schema version 99 skipped" in err
    page = (out / "index.html").read_text()
    assert f"{len(passed)} checks" in page and "schema version 99 skipped" in page
    assert "<title>gradcheck report: incomplete</title>" in page  # not a plain "passed"
    assert main(["report", str(good), "-o", str(tmp_path / "o2")]) == 0  # alone: a pass


def test_report_survives_link_loops_and_any_name_in_a_real_process(tmp_path):
    """Symbolic link loops among the inputs, a non-UTF-8 file name, a lone surrogate in a check
    name, an ASCII terminal: a report, every problem named, no internal error."""
    from dataclasses import replace

    bad = next(r for r in numpy_results() if not r.ok)
    d = tmp_path / "d"
    d.mkdir()
    odd = os.fsdecode(bytes(d) + b"/sh\xffard.jsonl")
    _shard(Path(odd), [replace(bad, name="op\ud800\u00e9")])
    (d / "self").symlink_to(".")
    (d / "a.jsonl").symlink_to("b.jsonl")
    (d / "b.jsonl").symlink_to("a.jsonl")
    (tmp_path / "x.jsonl").symlink_to("x.jsonl")
    proc = subprocess.run([sys.executable, "-m", "gradcheck.cli", "report", "d", "x.jsonl",
                           "-o", "out"], cwd=tmp_path, capture_output=True, timeout=300,
                          env=_env(PYTHONIOENCODING="ascii"))
    out, err = proc.stdout.decode("ascii"), proc.stderr.decode("ascii")
    assert proc.returncode == 2, (out, err)  # inputs not read
    assert "internal error" not in err and "Traceback" not in err
    assert "FAILED op\\ud800\\xe9" in out and "sh\\xffard.jsonl" not in err
    for name in ("d/self", "d/a.jsonl", "d/b.jsonl", "x.jsonl"):
        assert err.count(f"error: {name}: symbolic link loop") == 1, (name, err)
    page = (tmp_path / "out" / "index.html").read_bytes().decode("utf-8")
    assert "op\\ud800" in page and "sh\\xffard.jsonl" in page
    ET.parse(tmp_path / "out" / "junit.xml")


def test_a_broken_adapter_is_a_usage_error_before_pytest(capsys, monkeypatch, tmp_path):
    (tmp_path / "broken_adapters.py").write_text(
        "from gradcheck.engines.numpy.backend import NumpyBackend\n"
        "class NoDevices(NumpyBackend):\n"
        "    name = 'nodevices'\n"
        "    def devices(self):\n"
        "        return None\n"
        "class DevicesRaise(NumpyBackend):\n"
        "    name = 'devicesraise'\n"
        "    def devices(self):\n"
        "        raise RuntimeError('driver gone')\n"
        "class Unbuildable(NumpyBackend):\n"
        "    def __init__(self):\n"
        "        raise RuntimeError('cannot start')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    suites = str(ROOT / "suites")
    for attr, said in [("NoDevices", "devices() returned None"),
                       ("DevicesRaise", "devices() raised RuntimeError: driver gone"),
                       ("Unbuildable", "cannot be constructed: RuntimeError: cannot start")]:
        assert main(["run", "--backend", f"broken_adapters:{attr}", "--op", "sin",
                     "--suites", suites]) == 2
        captured = capsys.readouterr()
        assert said in captured.err and "Traceback" not in captured.err + captured.out
        assert "gradcheck run: pytest" not in captured.out  # pytest never started


# -- G: success that is not: write failures, selections of nothing, -j bounds ------------------

#: many quick passing checks: a stream far larger than the tiny disk it is written to
MANY_SUITE = '''
import numpy as np
import pytest
import gradcheck
from gradcheck import NumpyFunction

@pytest.mark.parametrize("k", range(60))
def test_many(k):
    fn = NumpyFunction(forward=np.sin, vjp=lambda a, c: (np.cos(a[0]) * c[0],), name=f"sin{k}")
    gradcheck.assert_gradients(fn, np.ones(3), backend="numpy")
'''


@pytest.fixture(scope="module")
def many_suite(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("many")
    (path / "test_many.py").write_text(MANY_SUITE)
    return path


def test_a_full_disk_during_run_is_an_error_naming_the_stream(many_suite, tmp_path):
    from tests.support.disk import tmpfs

    with tmpfs(tmp_path / "disk", size="64k") as disk:
        out = disk / "reports"
        proc = subprocess.run(
            [sys.executable, "-m", "gradcheck.cli", "run", "--suites", str(many_suite),
             "--report-dir", str(out)], cwd=many_suite, env=_env(), capture_output=True,
            text=True, timeout=300)
        text = proc.stdout + proc.stderr
        assert proc.returncode == 2, text[-3000:]  # before: 0, a truncated stream, no report
        assert f"cannot write {str(out / 'results.jsonl')!r}: No space left on device" in text
        assert "report written" not in text
    # the same suite on a disk with room passes: the exit status above is the disk's
    ok = gradcheck_cli("run", "--suites", str(many_suite), "--report-dir",
                       str(tmp_path / "roomy"), cwd=many_suite)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]


def test_a_full_disk_during_report_is_an_error_naming_the_file(tmp_path, capsys):
    from tests.support.disk import tmpfs

    source = tmp_path / "s.jsonl"
    source.write_text("".join(r.to_json() + "\n" for r in numpy_results()))
    with tmpfs(tmp_path / "disk", size="64k") as disk:
        (disk / "out").mkdir()
        (disk / "out" / "index.html").write_text("the previous report")
        assert main(["report", str(source), "-o", str(disk / "out")]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
        assert line.startswith("gradcheck: error: cannot write ")
        assert str(disk / "out" / "index.html") in line and "No space left on device" in line
        # written whole or not at all: the previous report is kept, no partial file left
        assert (disk / "out" / "index.html").read_text() == "the previous report"
        assert sorted(p.name for p in (disk / "out").iterdir()) == ["index.html"]


def test_a_read_only_report_directory_is_refused_before_the_run(tmp_path, capsys):
    from tests.support.disk import tmpfs

    source = tmp_path / "s.jsonl"
    source.write_text("".join(r.to_json() + "\n" for r in numpy_results()[:3]))
    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        for argv in (["report", str(source), "-o", str(ro / "out")],
                     ["run", "--suites", str(ROOT / "suites"), "--report-dir", str(ro / "out")],
                     ["sweep", "--backend", "torch", "--op", "torch.sin", "--report-dir",
                      str(ro)]):
            assert main(argv) == 2, argv
            captured = capsys.readouterr()
            assert "gradcheck run: pytest" not in captured.out
            (line,) = captured.err.strip().splitlines()
            assert str(ro) in line and ("not writable" in line or "cannot create" in line)


@pytest.mark.parametrize("argv, expected", [
    (["sweep", "--dtype", "float7"],
     "--dtype 'float7' is not a dtype the sweep checks; choose from float64, float32, "
     "float16, bfloat16"),
    (["sweep", "--op", ""], "--op '' is empty: it names nothing to select"),
    (["sweep", "--op", "  "], "--op '  ' is empty"),
    (["run", "--op", ""], "--op '' is empty: it names nothing to select"),
    (["run", "--dtype", ""], "--dtype '' is empty"),
    (["run", "--op", "nosuchop"], "--op 'nosuchop' matches no catalog op"),
    (["run", "--backend", "nosuchbackend"],
     "backend='nosuchbackend' is not valid; choose one of: 'numpy', 'torch'"),
    (["sweep", "--backend", "numpy"], "--backend 'numpy': the sweep reads the inventories "
                                      "of torch, jax"),
], ids=["sweep-dtype-float7", "sweep-op-empty", "sweep-op-blank", "run-op-empty",
        "run-dtype-empty", "run-op-nosuchop", "run-backend-unknown", "sweep-backend-numpy"])
def test_a_selection_of_nothing_is_an_error_naming_what_was_asked(argv, expected, tmp_path,
                                                                  capsys):
    code = main([*argv, "--report-dir", str(tmp_path / "r")]
                + (["--suites", str(ROOT / "suites")] if argv[0] == "run" else []))
    captured = capsys.readouterr()
    assert code == 2, captured
    (line,) = captured.err.strip().splitlines()
    assert expected in line
    assert "gradcheck run: pytest" not in captured.out and not (tmp_path / "r").exists()


def test_a_sweep_dtype_no_selected_op_declares_is_an_error(tmp_path):
    from gradcheck.sweep import SweepConfig, sweep
    from gradcheck.sweep.runner import NothingSelected

    pytest.importorskip("torch")
    pytest.importorskip("expecttest")
    cfg = SweepConfig(("torch",), ops=("torch.argmax",), dtypes=("bfloat16",), profile="quick")
    with pytest.raises(NothingSelected, match="argmax"):
        sweep(cfg, tmp_path)  # argmax is left out (not differentiable): no op at all
    cfg = SweepConfig(("torch",), ops=("torch.nn.functional.silu",), dtypes=("float16",),
                      profile="quick")
    inv_dtypes = __import__("gradcheck.sweep", fromlist=["inventory"]).inventory(
        "torch", ["torch.nn.functional.silu"]).ops[0].dtypes
    assert "float16" in inv_dtypes  # a declared dtype goes through the check below
    with pytest.raises(NothingSelected, match="--dtype 'complex64'"):
        sweep(SweepConfig(cfg.backends, cfg.ops, ("complex64",), "quick"), tmp_path)


def test_an_adapter_module_that_exits_at_import_is_an_error_not_a_pass(tmp_path):
    (tmp_path / "quitter.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "raiser.py").write_text("raise SystemExit(0)\n")
    for module in ("quitter", "raiser"):
        proc = gradcheck_cli("run", "--backend", f"{module}:Adapter", "--report-dir",
                             str(tmp_path / "r"), cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert (f"backend='{module}:Adapter': importing {module} called sys.exit(0)"
                in proc.stderr)
        assert "gradcheck run: pytest" not in proc.stdout
    # the API says the same (gradcheck.check would otherwise end the caller's process)
    from gradcheck.backends.registry import get_backend
    from gradcheck.core.errors import InvalidArgument

    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(InvalidArgument, match="called sys.exit"):
            get_backend("raiser:Adapter")
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize("jobs", ["0", "-1", "abc", "1.5", "", "100000"])
def test_jobs_out_of_bounds_is_one_clear_line(command, jobs, tmp_path, capsys):
    from gradcheck.cli import usable_cpus

    argv = [command, f"--jobs={jobs}", "--report-dir", str(tmp_path / "r")]
    code = main(argv + (["--suites", str(ROOT / "suites")] if command == "run" else []))
    captured = capsys.readouterr()
    assert code == 2
    (line,) = captured.err.strip().splitlines()  # one line, not pytest's usage
    shown = jobs if jobs == "100000" else repr(jobs)
    assert line.startswith(f"gradcheck: error: -j/--jobs {shown}")
    assert f"{4 * usable_cpus()}" in line
    assert "gradcheck run: pytest" not in captured.out and not (tmp_path / "r").exists()


def test_jobs_within_bounds_reach_pytest(tmp_path):
    from gradcheck.cli import parse_jobs, pytest_args, usable_cpus

    assert parse_jobs("auto") == "auto" and parse_jobs("1") == 1
    assert parse_jobs(str(4 * usable_cpus())) == 4 * usable_cpus()
    args = _parser().parse_args(["run", "-j", "2", "--report-dir", str(tmp_path)])
    if __import__("importlib").util.find_spec("xdist") is not None:
        argv = pytest_args(args, ROOT / "suites")
        assert argv[argv.index("-n") + 1] == "2"
