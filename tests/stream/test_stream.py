"""The result stream: line-by-line appends, test ids, env-var activation, crash safety and the
tolerant reader."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck import stream
from gradcheck.cli import main as cli_main
from gradcheck.core.results import CheckResult
from gradcheck.plugin.session_report import summary_lines
from gradcheck.report import write_report
from tests.support.report_data import FUNCTIONS, numpy_results

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop(stream.ENV_VAR, None)
    return env


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_check_results_are_streamed_with_test_id_and_read_back(tmp_path):
    path = tmp_path / "r.jsonl"
    x = np.random.default_rng(1).normal(size=(2, 3))
    with stream.using(path):
        stream.set_test_id("suite/test_a.py::test_x[sin]")
        try:
            report = gradcheck.check(FUNCTIONS["sin"], x, backend="numpy")
        finally:
            stream.set_test_id(None)
        # appended the moment it completed: readable before the stream is closed
        mid = stream.read_streams([path])
        assert len(mid.checks) == len(report.results) > 0
    recs = _records(path)
    assert [r["record"] for r in recs][0] == "environment"
    assert [r["record"] for r in recs][-1] == "end"
    env = recs[0]
    assert env["gradcheck"] == gradcheck.__version__ and env["python"] and env["platform"]
    assert "numpy" in env["packages"]
    data = stream.read_streams([path])
    assert data.problems == []
    assert [c.test_id for c in data.checks] == ["suite/test_a.py::test_x[sin]"] * len(report)
    assert data.checks == list(report.results)  # returned results carry the id too
    (run,) = data.runs.values()
    # every adapter the process instantiated, in order: earlier tests in this worker may have
    # instantiated others first
    numpy_rec = [b for b in run.backends if b["name"] == "numpy"]
    assert run.ended and numpy_rec and numpy_rec[0]["devices"]


def test_no_stream_means_no_file_and_unchanged_results(tmp_path, monkeypatch):
    monkeypatch.delenv(stream.ENV_VAR, raising=False)
    monkeypatch.setattr(stream.writer, "_active", None)
    report = gradcheck.check(FUNCTIONS["sin"], np.ones(3), backend="numpy")
    # the report hooks set the current test id, stream or not
    assert report.passed and {r.test_id for r in report} == {
        os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]}
    assert list(tmp_path.iterdir()) == []


def test_env_var_streams_a_users_own_script(tmp_path):
    path = tmp_path / "mine.jsonl"
    script = ("import numpy as np, gradcheck\n"
              "from tests.support.report_data import FUNCTIONS\n"
              "gradcheck.check(FUNCTIONS['tanh_mutant'], np.ones(3), backend='numpy')\n")
    env = _env()
    env[stream.ENV_VAR] = str(path)
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True, timeout=120)
    data = stream.read_streams([path])
    assert data.checks and not data.passed and data.problems == []
    assert all(r.ended for r in data.runs.values())


_KILLED_WRITER = """
import sys, time
from gradcheck import stream
from gradcheck.core.results import CheckResult
results = [CheckResult.from_json(line) for line in open(sys.argv[2])]
stream.activate(sys.argv[1])
i = 0
while True:  # record forever; the test kills this process
    stream.record(results[i % len(results)])
    i += 1
    time.sleep(0.002)
"""


def test_killed_run_leaves_every_completed_line_and_the_report_rebuilds(tmp_path):
    source = tmp_path / "source.jsonl"
    source.write_text("".join(r.to_json() + "\n" for r in numpy_results()))
    path = tmp_path / "run" / "results.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path), str(source)],
                            cwd=ROOT, env=_env())
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and path.read_bytes().count(b"\n") > 150:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the writer produced no results")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    lines_on_disk = path.read_bytes().count(b"\n")
    data = stream.read_streams([path])
    assert data.problems == []  # single-write appends: no torn line even under SIGKILL
    assert len(data.checks) == lines_on_disk - 1  # every completed line but the environment
    (run,) = data.runs.values()
    assert not run.ended
    # a torn last line (as a kill inside a large write would leave) is skipped and reported
    with open(path, "ab") as f:
        f.write(numpy_results()[0].to_json().encode()[:90])
    out = tmp_path / "rebuilt"
    assert cli_main(["report", str(path), "-o", str(out)]) == 1  # the mutants failed
    html = (out / "index.html").read_text()
    assert "truncated last line" in html and "has no end record" in html
    assert stream.read_streams([path]).checks == data.checks


def test_malformed_lines_are_skipped_and_reported(tmp_path):
    good = numpy_results()[:3]
    bad_status = json.loads(good[0].to_json())
    bad_status["status"] = "exploded"
    lines = [good[0].to_json(), "{not json", "[1, 2, 3]",
             json.dumps({"schema": 1, "record": "mystery"}), json.dumps(bad_status),
             good[1].to_json(), "", good[2].to_json()[:-20]]
    path = tmp_path / "bad.jsonl"
    path.write_bytes("\n".join(lines[:-1]).encode() + b"\n\xff\xfe broken bytes\n"
                     + lines[-1].encode())
    data = stream.read_streams([path])
    assert data.checks == good[:2]
    reasons = [p.reason for p in data.problems]
    assert len(reasons) == 6, reasons
    for fragment in ("malformed JSON", "not a JSON object", "unknown record type 'mystery'",
                     "invalid check record", "not UTF-8", "truncated last line"):
        assert sum(fragment in r for r in reasons) == 1, (fragment, reasons)
    assert [p.line for p in data.problems] == [2, 3, 4, 5, 8, 9]
    out = tmp_path / "out"
    assert cli_main(["report", str(path), "-o", str(out)]) == 0  # skipped, never fatal
    assert "malformed JSON" in (out / "index.html").read_text()


def test_a_stream_given_twice_is_counted_once(tmp_path):
    results = numpy_results()[:5]
    path = tmp_path / "r.jsonl"
    with stream.using(path) as s:
        for r in results + results[:2]:  # one process may record the same result twice
            s.record(r)
    data = stream.read_streams([path, tmp_path])  # the file and its directory
    assert len(data.checks) == 7
    assert [p.reason for p in data.problems] == ["given more than once: read once"]
    # a merged stream given together with one of its parts
    part = tmp_path / "parts" / "results.gw0.jsonl"
    part.parent.mkdir()
    part.write_text(path.read_text())
    data = stream.read_streams([path, part])
    assert len(data.checks) == 7
    assert "repeat lines of another stream" in data.problems[0].reason


def test_write_failure_warns_and_the_check_goes_on(tmp_path):
    with stream.using(tmp_path / "r.jsonl") as s:
        os.close(s._fd)  # the file descriptor disappears under the stream
        lost = r"cannot write .*r\.jsonl.*results from here on are lost"
        with pytest.warns(RuntimeWarning, match=lost):
            report = gradcheck.check(FUNCTIONS["sin"], np.ones(2), backend="numpy")
        assert report.passed
        s._fd = os.open(os.devnull, os.O_WRONLY)  # let close() finish cleanly


def test_round_trip_of_every_kind_of_result(tmp_path):
    results = numpy_results()
    path = tmp_path / "r.jsonl"
    with stream.using(path) as s:
        for r in results:
            s.record(r)
    assert stream.read_streams([path]).checks == results
    assert {r.status.value for r in results} == {"passed", "failed", "error", "inconclusive",
                                                 "skipped"}
    assert CheckResult.from_json(results[0].to_json()) == results[0]


def _valid_lines() -> list[str]:
    run = {"schema": 1, "run_id": "r1"}
    return [json.dumps({**run, "record": "environment", "role": "main", "pid": 1,
                        "git": {"commit": "abc", "dirty": False}, "packages": {"numpy": "2"}}),
            *(json.dumps({**json.loads(r.to_json()), "run_id": "r1"})
              for r in numpy_results()[:6]),
            json.dumps({**run, "record": "test", "test_id": "t::a", "outcome": "failed",
                        "duration_s": 0.5, "message": "boom"}),
            json.dumps({**run, "record": "backends", "backends": [
                {"name": "numpy", "version": "2", "devices": ["cpu"], "dtypes": ["float64"],
                 "semantics": {"accumulation": "functional"}}]}),
            json.dumps({**run, "record": "end", "exitstatus": 1, "results": 6,
                        "finished": "now"})]


def _with(line: str, key: str, value) -> str:
    obj = json.loads(line)
    obj[key] = value
    return json.dumps(obj)


_BAD_FIELDS = [
    ("check", "status", 5), ("check", "shapes", "x"), ("check", "shapes", [[1, "2"]]),
    ("check", "worst", [{"index": None}]), ("check", "worst", "x"), ("check", "details", []),
    ("check", "discrepancy_ratio", "abc"), ("check", "expected", [1.0]),
    ("check", "allowed", 10 ** 400), ("check", "seed", 1.5), ("check", "seed", True),
    ("check", "kind", None), ("check", "backend", 3), ("check", "name", {"a": 1}),
    ("check", "convergence", [[1.0]]), ("check", "convergence", [["a", 1.0]]),
    ("check", "input_index", "0"), ("check", "message", None), ("check", "test_id", 7),
    ("check", "run_id", ["x"]),
    ("test", "duration_s", "x"), ("test", "duration_s", -1), ("test", "outcome", "exploded"),
    ("test", "test_id", None), ("test", "message", 5),
    ("end", "exitstatus", "x"), ("end", "results", []), ("end", "finished", 3),
    ("environment", "git", "x"), ("environment", "packages", ["numpy"]),
    ("environment", "role", 1), ("environment", "pid", "1"),
    ("backends", "backends", "x"), ("backends", "backends", [{"name": "n", "semantics": "s"}]),
    ("backends", "backends", [{"name": "n", "devices": [1]}]), ("backends", "backends", [3]),
]


@pytest.mark.parametrize("record, key, value", _BAD_FIELDS,
                         ids=[f"{r}.{k}={v!r}"[:40] for r, k, v in _BAD_FIELDS])
def test_every_field_read_is_type_checked(tmp_path, record, key, value):
    lines = _valid_lines()
    k = next(i for i, line in enumerate(lines) if json.loads(line)["record"] == record)
    lines[k] = _with(lines[k], key, value)
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    data = stream.read_streams([path])
    (problem,) = data.problems
    assert problem.line == k + 1 and f"invalid {record} record" in problem.reason
    assert key in problem.reason or "run_id" in problem.reason, problem.reason
    files = write_report(data, tmp_path / "out")  # the rest still makes a report
    assert files.html.stat().st_size > 0
    if record == "end":  # an unusable end record: the process is not known to have finished
        assert not data.runs["r1"].ended


def test_deeply_nested_json_is_skipped_not_fatal(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    nested_details = _with(_valid_lines()[1], "details", {"a": json.loads("[" * 200 + "]" * 200)})
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([deep, nested_details, _valid_lines()[2], deep]))  # no last \n
    data = stream.read_streams([path])
    reasons = [p.reason for p in data.problems]
    assert reasons == ["JSON nested too deeply to parse",
                       "invalid check record (InvalidField: nested deeper than 64 levels)",
                       "JSON nested too deeply to parse"], reasons
    assert len(data.checks) == 1
    write_report(data, tmp_path / "out")


def _mutations():
    from hypothesis import strategies as st

    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
        | st.text(max_size=8) | st.sampled_from(["inf", "-inf", "nan", "passed", "failed"]),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                     max_size=3),
        max_leaves=12)
    field_change = st.tuples(st.just("field"), st.integers(0, 50), json_values)
    text_change = st.tuples(st.just("text"), st.integers(0, 10_000), st.text(max_size=4))
    cut = st.tuples(st.just("cut"), st.integers(0, 10_000), st.none())
    return st.lists(st.tuples(st.integers(0, 9), st.one_of(field_change, text_change, cut)),
                    min_size=1, max_size=6)


def _mutate(lines: list[str], changes) -> list[str]:
    lines = list(lines)
    for which, (how, where, value) in changes:
        k = which % len(lines)
        if how == "field":
            try:
                obj = json.loads(lines[k])
            except ValueError:
                continue
            if isinstance(obj, dict) and obj:
                key = sorted(obj)[where % len(obj)]
                obj[key] = value
                lines[k] = json.dumps(obj)
        elif how == "text":
            at = where % (len(lines[k]) + 1)
            lines[k] = lines[k][:at] + value + lines[k][at:]
        else:
            lines[k] = lines[k][:where % (len(lines[k]) + 1)]
    return lines


def test_mutated_streams_never_break_reading_or_the_report(tmp_path_factory):
    from hypothesis import HealthCheck, given, settings

    valid = _valid_lines()

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_mutations())
    def run(changes):
        out = tmp_path_factory.mktemp("fuzz")
        path = out / "s.jsonl"
        path.write_text("\n".join(_mutate(valid, changes)) + "\n")
        data = stream.read_streams([path])
        write_report(data, out / "report")
        lines: list[str] = []
        summary_lines(write_report(data, out / "report"), lines.append)
        # every line is accounted for: read, or skipped with a reason
        assert len(data.checks) + len(data.tests) + len(data.problems) <= len(valid)

    run()


def test_a_report_of_an_unfinished_process_exits_1_and_warns(tmp_path, capsys):
    lines = [line for line in _valid_lines() if json.loads(line)["record"] not in ("end", "test")]
    lines = [line for line in lines if json.loads(line).get("status", "passed") == "passed"]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert stream.read_streams([path]).passed  # every check passed ...
    assert cli_main(["report", str(path), "-o", str(tmp_path / "o")]) == 1  # ... but unfinished
    err = capsys.readouterr().err
    assert "warning: process r1 (main, " in err and "has no end record" in err
    path.write_text("\n".join(lines + [_valid_lines()[-1]]) + "\n")
    assert cli_main(["report", str(path), "-o", str(tmp_path / "o")]) == 0


# -- hostile inputs: future schemas, missing inputs, link loops, any bytes and names -------------


def _stream_of(path: Path, results: list[CheckResult]) -> Path:
    with stream.using(path) as s:
        for r in results:
            s.record(r)
    return path


def test_records_of_an_unknown_schema_version_are_skipped_and_named(tmp_path):
    """A stream from a future gradcheck (``"schema": 99``) used to be merged as if understood."""
    results = numpy_results()
    good = _stream_of(tmp_path / "good.jsonl", results[:3])
    future = tmp_path / "future.jsonl"
    odd = tmp_path / "odd.jsonl"
    lines = _stream_of(tmp_path / "src.jsonl", results[3:6]).read_text().splitlines()
    future.write_text("".join(json.dumps({**json.loads(t), "schema": 99}) + "\n" for t in lines))
    versions = ["1", True, 0, None, 2.5]
    assert len(lines) >= len(versions)
    odd.write_text("".join(json.dumps({**json.loads(t), "schema": v}) + "\n"
                           for t, v in zip(lines[:len(versions)], versions, strict=True)))
    data = stream.read_streams([good, future, odd])
    assert data.checks == results[:3]  # none of the others counted as if understood
    assert all(r.source == str(good) for r in data.runs.values())  # their processes neither
    schema = data.unknown_schema
    assert [p.source for p in schema] == [str(future)] + [str(odd)] * len(versions)
    first = schema[0]
    assert first.kind == "schema" and first.line == 1
    assert f"{len(lines)} record(s) of schema version 99 skipped" in first.reason
    assert data.problems[:len(schema)] == schema  # listed before single damaged lines


def test_missing_and_unreadable_inputs_are_named_once_and_the_rest_is_read(tmp_path):
    results = numpy_results()
    a = _stream_of(tmp_path / "a.jsonl", results[:2])
    b = _stream_of(tmp_path / "b.jsonl", results[2:4])
    missing = tmp_path / "missing.jsonl"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere")
    data = stream.read_streams([a, missing, b, missing, dangling])
    assert data.checks == results[:4] and data.sources == [str(a), str(b)]
    assert [(p.source, p.kind) for p in data.unread_inputs] == [
        (str(missing), "input"), (str(dangling), "input")]
    assert "no such file" in data.problems[0].reason
    assert "broken symbolic link" in data.problems[1].reason


def test_symlink_loops_among_inputs_are_named_and_not_followed(tmp_path):
    """A directory holding a link to itself, links to each other, a self-link: each one is a
    problem that names it; nothing hangs, recurses or raises (``Path.resolve`` used to raise
    RuntimeError on a looping input)."""
    results = numpy_results()
    d = tmp_path / "d"
    d.mkdir()
    _stream_of(d / "good.jsonl", results[:2])
    (d / "self").symlink_to(".")
    (d / "up.jsonl").symlink_to("..")
    (d / "self.jsonl").symlink_to("self.jsonl")
    (d / "a.jsonl").symlink_to("b.jsonl")
    (d / "b.jsonl").symlink_to("a.jsonl")
    (tmp_path / "x.jsonl").symlink_to("y.jsonl")
    (tmp_path / "y.jsonl").symlink_to("x.jsonl")
    data = stream.read_streams([d, tmp_path / "x.jsonl", tmp_path / "y.jsonl", d / "self"])
    assert data.checks == results[:2] and data.sources == [str(d / "good.jsonl")]
    named = {p.source: p.reason for p in data.unread_inputs}
    assert set(named) == {str(d / n) for n in ("self", "up.jsonl", "self.jsonl", "a.jsonl",
                                                "b.jsonl")} | {str(tmp_path / "x.jsonl"),
                                                               str(tmp_path / "y.jsonl")}
    assert all("symbolic link loop" in r for r in named.values()), named
    # d/self given directly is the directory itself (already read): read once, not a loop
    assert [p.source for p in data.problems if p.reason == "given more than once: read once"
            ] == [str(d / "self")]


def test_any_bytes_and_any_name_survive_writer_reader_and_report(tmp_path):
    """Lone surrogates in names, a non-UTF-8 file name, details JSON cannot carry as they are:
    written, read back and reported (they used to raise TypeError / UnicodeEncodeError)."""
    bad = next(r for r in numpy_results() if not r.ok)
    odd = replace(bad, name="op\ud800\x01", test_id="t\udcff", backend="np\ud83d",
                  details={(1, 2): float("nan"), "b": b"\xff", "\udcfe": [float("inf")]})
    path = Path(os.fsdecode(bytes(tmp_path) + b"/r\xff\xfe.jsonl"))
    with stream.using(path) as s:
        s.record(odd)  # tuple keys: TypeError before
        s.write_record({"record": "test", "test_id": "x\ud800", "outcome": "failed",
                        "duration_s": 0.5, "message": "m\udcff", ("k",): float("nan")})
    data = stream.read_streams([tmp_path])  # the directory: the file's name is found there
    assert not data.problems, [str(p) for p in data.problems]
    (check,) = data.checks
    assert check.name == odd.name and check.backend == odd.backend
    assert check.details["(1, 2)"] != check.details["(1, 2)"]  # NaN, as the stream writes it
    assert data.tests[0].test_id == "x\ud800"
    files = write_report(data, tmp_path / "out")
    page = files.html.read_bytes().decode("utf-8")  # strict
    assert "op\\ud800" in page and "r\\xff\\xfe.jsonl" in page
    ET.parse(files.junit)
    lines: list[str] = []
    summary_lines(files, lines.append)
    "\n".join(lines).encode("utf-8")  # the terminal summary encodes too


@pytest.mark.parametrize("devices", [None, "cpu", ["cpu", 3], RuntimeError("driver gone")])
def test_a_broken_adapters_devices_are_described_in_a_record_the_reader_accepts(devices):
    """A broken adapter left in the registry's cache (another check of the same process met
    it) must not make every later stream's ``backends`` record unreadable."""
    from gradcheck.engines.numpy.backend import NumpyBackend
    from gradcheck.stream.environment import describe_backend
    from gradcheck.stream.fields import backends_fields

    class Broken(NumpyBackend):
        name = "broken-devices"

        def devices(self):
            if isinstance(devices, Exception):
                raise devices
            return devices

    record = describe_backend(Broken())
    assert record["devices"] == [] and record["devices_error"]
    assert backends_fields({"backends": [record]}) == [record]
    assert describe_backend(NumpyBackend())["devices"] == ["cpu"]


# -- a full disk and an unwritable directory (real file systems: tests/support/disk.py) -------


def test_a_write_that_fails_is_remembered_and_named_not_silent(tmp_path):
    import warnings as _warnings

    from gradcheck.core.errors import WriteFailed
    from gradcheck.stream import ResultStream
    from tests.support.disk import tmpfs
    from tests.support.report_data import numpy_results

    with tmpfs(tmp_path / "disk", size="64k") as disk:
        s = ResultStream(disk / "results.jsonl")
        assert s.error is None
        with _warnings.catch_warnings(record=True) as caught:
            _warnings.simplefilter("always")
            for _ in range(40):  # far more than 64 KiB of results
                for r in numpy_results():
                    s.record(r)
            s.close()
        assert isinstance(s.error, WriteFailed)  # before: a warning at most, nothing to ask
        assert str(s.error) == (f"cannot write {str(disk / 'results.jsonl')!r}: "
                                "No space left on device")
        assert len([w for w in caught if "No space left" in str(w.message)]) == 1


def test_a_stream_in_an_unwritable_directory_is_a_write_failure_naming_it(tmp_path):
    from gradcheck.core.errors import WriteFailed
    from gradcheck.stream import ResultStream
    from tests.support.disk import tmpfs

    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        with pytest.raises(WriteFailed, match=r"cannot write '.*/ro/sub/results\.jsonl'"):
            ResultStream(ro / "sub" / "results.jsonl")
