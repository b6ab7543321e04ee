"""The sweep (gradcheck/sweep, `gradcheck sweep`): inventories read from the backends, edge
points, mutants found and triaged (their correct twins not), --op selection, the stream and the
report, -j 2 merging.  Each test sweeps a handful of ops in the quick profile."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from gradcheck.cli import main
from gradcheck.report import write_report
from gradcheck.stream import read_streams
from gradcheck.sweep import Op, SweepConfig, findings, inventory, sweep
from gradcheck.sweep.inventory import ELEMENTWISE
from gradcheck.sweep.points import points
from tests.support.child_env import ROOT, child_env

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("expecttest")
QUICK = SweepConfig((), profile="quick")
X = np.array([0.3, -1.2, 0.7, 2.1, -0.4, 1.6])


def test_torch_inventory_from_opinfo_qualified_names():
    inv = inventory("torch", ["torch.nn.functional.silu", "torch.special.erfcx"])
    names = {o.name for o in inv.ops}
    assert {"torch.nn.functional.silu", "torch.special.erfcx"} <= names
    silu = next(o for o in inv.ops if o.name == "torch.nn.functional.silu")
    assert {"float64", "float32", "float16", "bfloat16"} <= set(silu.dtypes)
    assert silu.family == ELEMENTWISE and silu.template[0].size > 1


def test_jax_inventory_probes_namespaces_and_records_what_is_left_out():
    inv = inventory("jax", ["jax.nn.selu", "jax.scipy.special.erfcx", "jax.numpy.zeros",
                            "jax.numpy.argmax"])
    assert {o.name for o in inv.ops} == {"jax.nn.selu", "jax.scipy.special.erfcx"}
    reasons = {x.name: x.reason for x in inv.left_out}
    assert "not an op" in reasons["jax.numpy.zeros"]
    assert "non-floating" in reasons["jax.numpy.argmax"]  # an integer output


def test_points_cover_edges_and_stay_in_the_domain():
    import jax.numpy as jnp

    # an in-domain template, as OpInfo's samples and the jax probes are
    op = Op("jax.numpy.log", "jax", jnp.log, (np.abs(X),), family=ELEMENTWISE, leaf="log")

    def forward(arrays, dtype):
        with np.errstate(all="ignore"):
            return [np.log(np.asarray(arrays[0], dtype=np.float64))]

    made, skipped = points(op, "float64", "default", forward)
    by_name = {p.name: p for p in made}
    assert {"subnormal", "tiny", "huge", "near_one", "half_integer"} <= set(by_name)
    assert all(np.all(p.arrays[0] > 0) for p in made)  # log's domain kept
    assert by_name["subnormal"].arrays[0].min() < 1e-307 and by_name["huge"].arrays[0].max() > 1e300
    assert any(s.name == "zero" for s in skipped)  # log(0) = -inf everywhere: left out


class _ScaledSin(torch.autograd.Function):
    """sin with a backward off by a relative 1e-6 (the mutant) or exact (its twin)."""

    scale = 1.0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x) * _ScaledSin.scale


class _Mutant(_ScaledSin):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.cos(x) * (1 + 1e-6)


def _jax_pair():
    import jax.numpy as jnp

    def build(sign):
        @jax.custom_vjp
        def softsign(x):
            return x / (1 + jnp.abs(x))

        softsign.defvjp(lambda x: (softsign(x), x),
                        lambda x, g: (sign * g / (1 + jnp.abs(x)) ** 2,))
        return softsign

    return build(1.0), build(-1.0)


def _ops():
    twin_j, mutant_j = _jax_pair()
    kw = dict(family=ELEMENTWISE, fwd=False, order2=False)
    return [Op("mutant.torch_sin", "torch", _Mutant.apply, (X.copy(),), leaf="sin", **kw),
            Op("twin.torch_sin", "torch", _ScaledSin.apply, (X.copy(),), leaf="sin", **kw),
            Op("mutant.jax_softsign", "jax", mutant_j, (X.copy(),), **kw),
            Op("twin.jax_softsign", "jax", twin_j, (X.copy(),), **kw)]


def test_mutants_are_found_and_triaged_twins_are_not(tmp_path):
    outcome = sweep(QUICK, tmp_path, extra_ops=_ops())
    data = read_streams([outcome.stream])
    found: dict = {}
    for f in findings(data.checks):
        found.setdefault(f.op, []).append(f)
    for name in ("mutant.torch_sin", "mutant.jax_softsign"):
        classes = {f.cls for f in found[name]}
        assert "confirmed" in classes and "false_alarm" not in classes, found[name]
        confirmed = [r.details["triage"] for r in data.checks if r.name == name
                     and r.details.get("triage", {}).get("class") == "confirmed"]
        assert any(t["evidence"]["fd"].get("fd_families_agree")
                   and t["evidence"]["fd"]["ad_vs_fd"] > 1e-7 for t in confirmed)
        assert all(t["reproducer"].strip() for t in confirmed)
    torch_sin = next(f for f in found["mutant.torch_sin"] if f.cls == "confirmed")
    assert torch_sin.evidence["mpmath"]["max_relative_error"] > 5e-7
    for name in ("twin.torch_sin", "twin.jax_softsign"):
        twin = [r for r in data.checks if r.name == name]
        assert twin and all(r.ok for r in twin), [r.message for r in twin if not r.ok]
        assert name not in found
    html = write_report(data, tmp_path / "report").html.read_text()
    section = html.split('id="findings"', 1)[1].split("</section>", 1)[0]
    assert "mutant.torch_sin" in section and "mutant.jax_softsign" in section
    assert "twin." not in section and "confirmed" in section


def test_op_glob_selects_by_qualified_name():
    inv = inventory("jax", ["jax.nn.s*"])
    assert inv.ops and all(o.name.startswith("jax.nn.s") for o in inv.ops)
    assert "jax.nn.selu" in {o.name for o in inv.ops}
    assert not inv.select(["jax.nn.selu"]).left_out


def test_cli_writes_the_stream_and_the_report(tmp_path):
    out = tmp_path / "rep"
    proc = subprocess.run(
        [sys.executable, "-m", "gradcheck.cli", "sweep", "--backend", "jax", "--op",
         "jax.nn.selu", "--op", "jax.nn.soft_sign", "--profile", "quick", "--report-dir",
         str(out)], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr
    assert "jax: 2 ops swept" in proc.stdout
    data = read_streams([out / "results.jsonl"])
    assert not data.problems
    names = Counter(r.name for r in data.checks)
    assert set(names) == {"jax.nn.selu", "jax.nn.soft_sign"}
    assert all(r.test_id.startswith("sweep:jax-") for r in data.checks)
    assert any(r.details["sweep"].get("point") == "tiny" for r in data.checks)
    html = (out / "index.html").read_text()
    assert "jax.nn.selu" in html and (out / "junit.xml").is_file()


def test_two_jobs_merge_into_one_stream(tmp_path):
    cfg = SweepConfig(("jax",), ops=("jax.nn.selu", "jax.nn.soft_sign", "jax.numpy.sinh"),
                      profile="quick", triage=False)
    one = read_streams([sweep(cfg, tmp_path / "one").stream])
    two_out = sweep(cfg, tmp_path / "two", jobs=2)
    two = read_streams([two_out.stream])
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["results.jsonl"]
    assert not two.problems and all(r.ended for r in two.runs.values())
    assert len(two.runs) == 3  # the parent and two workers

    def key(data):
        return Counter((r.name, r.kind, r.test_id, r.status.value, r.dtype) for r in data.checks)

    assert key(one) == key(two) and len(one.checks) > 20


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["sweep", "--backend", "numpy", "--report-dir", str(tmp_path)]) == 2
    assert main(["sweep", "--backend", "jax", "--op", "no_such_op_anywhere", "--report-dir",
                 str(tmp_path)]) == 2
    assert main(["sweep", "--backend", "jax", "-j", "0", "--report-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "reads the inventories of" in err and "matches no op" in err and "-j/--jobs" in err


def test_known_findings_are_data_matched_by_op_kind_and_point():
    from gradcheck.sweep import known

    entry = known.lookup("torch", "torch.linalg.det", "vjp", "float64", "ties")
    assert entry is not None and "singular" in entry.reason
    assert known.lookup("torch", "torch.linalg.det", "vjp", "float64", "unit") is None
    assert known.lookup("jax", "torch.linalg.det", "vjp", "float64", "ties") is None


def _dying_worker(backend, names, cfg, path, progress):
    """A worker that dies of a signal on the op named "dies" (as a native crash would)."""
    import os
    from pathlib import Path

    for name in names:
        Path(progress).write_text(name)
        if name == "dies":
            os.abort()
    Path(path).write_text("")


def test_a_worker_that_dies_is_recorded_and_replaced(tmp_path):
    from gradcheck import stream
    from gradcheck.sweep.runner import run_parallel

    with stream.using(tmp_path / "main.jsonl"):
        parts = run_parallel([("jax", ["fine", "dies", "after"])], QUICK, tmp_path, 1,
                             target=_dying_worker)
    crashes = [r for r in read_streams([tmp_path / "main.jsonl"]).checks]
    assert [(r.name, r.status.value, r.details["triage"]["class"]) for r in crashes] == [
        ("dies", "error", "crash")]
    assert "signal 6" in crashes[0].message
    assert len(parts) == 2 and parts[1].exists()  # a second worker took "after"


def _hanging_worker(backend, names, cfg, path, progress):
    """A worker that hangs on the op named "hangs" (as a loop inside native code would: the
    in-process limits never get to run)."""
    import time
    from pathlib import Path

    for name in names:
        Path(progress).write_text(name)
        while name == "hangs":
            time.sleep(1)
    Path(progress).write_text("")  # as run_ops does once every op is done
    Path(path).write_text("")


def test_a_worker_hanging_on_one_op_is_killed_recorded_and_replaced(tmp_path):
    from gradcheck import stream
    from gradcheck.sweep.runner import run_parallel

    with stream.using(tmp_path / "main.jsonl"):
        parts = run_parallel([("jax", ["fine", "hangs", "after"])], QUICK, tmp_path, 1,
                             target=_hanging_worker, kill_s=3.0)
    hung = [r for r in read_streams([tmp_path / "main.jsonl"]).checks]
    assert [(r.name, r.status.value, r.details["triage"]["symptom"]) for r in hung] == [
        ("hangs", "error", "hang")]
    assert "worker was killed" in hung[0].message and hung[0].details["sweep"]["hung_s"] >= 3
    assert len(parts) == 2 and parts[1].exists()  # a second worker took "after"


def test_resume_checks_only_the_ops_without_results(tmp_path):
    first = SweepConfig(("jax",), ops=("jax.nn.selu",), profile="quick", triage=False)
    sweep(first, tmp_path)
    before = read_streams([tmp_path / "results.jsonl"]).checks
    # a stopped worker's stream and the op it was checking (checked again on resume)
    (tmp_path / "results.sweep0.progress").write_text("jax.nn.soft_sign")
    both = SweepConfig(("jax",), ops=("jax.nn.selu", "jax.nn.soft_sign"), profile="quick",
                       triage=False)
    outcome = sweep(both, tmp_path, resume=True)
    assert outcome.resumed == 1
    after = read_streams([outcome.stream]).checks
    names = Counter(r.name for r in after)
    assert names["jax.nn.selu"] == Counter(r.name for r in before)["jax.nn.selu"]
    assert names["jax.nn.soft_sign"] > 0
    assert not list(tmp_path.glob("results.sweep*"))


def test_a_known_hang_is_shown_as_known():
    from gradcheck.sweep.runner import crash_result

    hang = crash_result("jax", "jax.scipy.special.expi", -9, 500.0)
    assert hang.details["triage"]["symptom"] == "hang" and "never returns" in hang.details["known"]
    assert "known" not in crash_result("jax", "jax.numpy.sin", -6).details


def test_first_order_results_of_an_order_2_call_are_triaged_with_order_1_evidence():
    """gradcheck.check at order 2 checks order 1 too.  jax.numpy.unique's gradient is silently
    0 (its first derivative is a permutation); judged with the order-2 evidence (its second
    derivative is 0, and so is AD's) that VJP failure had been classed a false alarm."""
    import gradcheck
    from gradcheck.sweep import triage
    from gradcheck.sweep.points import Point

    jnp = pytest.importorskip("jax.numpy")
    x = np.array([0.3, -1.2, 0.7, 2.1])
    op = Op("jax.numpy.unique", "jax", jnp.unique, (x,), family=ELEMENTWISE, fwd=False,
            order2=True)
    results = list(gradcheck.check(jnp.unique, x, backend="jax", modes=("rev",), order=2,
                                   seed=0).results)
    vjp = [r for r in results if r.kind == "vjp" and r.status.value == "failed"]
    assert vjp, [r.message for r in results]
    got = triage.triage(op, Point("unit", (x,)), "float64", 2, results)
    classes = {r.kind.value: r.details["triage"]["class"] for r in got if "triage" in r.details}
    assert classes["vjp"] == "confirmed", classes
    ev = next(r for r in got if r.kind == "vjp").details["triage"]["evidence"]
    assert ev["fd"]["order"] == 1 and ev["fd"]["ad_vs_fd"] > 0.5


_STOPPABLE = '''
import os, sys, time
from pathlib import Path

def worker(backend, names, cfg, path, progress):
    Path(progress).write_text(names[0])
    Path(path).with_suffix(".pid").write_text(str(os.getpid()))
    while True:
        time.sleep(1)

if __name__ == "__main__":
    from gradcheck import stream
    from gradcheck.sweep import cli as sweep_cli
    from gradcheck.sweep.runner import SweepConfig, run_parallel

    out = Path(sys.argv[1])
    cfg = SweepConfig(("jax",), profile="quick")
    try:
        with sweep_cli.stopped_by_signals(), stream.using(out / "main.jsonl"):
            run_parallel([("jax", ["slow"])], cfg, out, 1, target=worker)
    except sweep_cli.Stopped as exc:
        sys.exit(100 + exc.signum)
'''


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGKILL"])
def test_a_stopped_sweep_leaves_no_worker_running(tmp_path, signame):
    """SIGTERM or SIGHUP to the sweep (a CI timeout or cancellation, ``kill``, a closed
    terminal) stops its workers too: before, they went on checking ops, orphaned, for as long
    as their shards lasted (SIGHUP ended the sweep alone).  A SIGKILLed sweep cannot stop them:
    each worker dies with it (before, it ran on)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.support.child_env import child_env

    if signame == "SIGKILL" and not sys.platform.startswith("linux"):
        pytest.skip("a worker dies with its parent through Linux's PR_SET_PDEATHSIG")
    sig = signal.Signals[signame]
    (tmp_path / "stoppable.py").write_text(_STOPPABLE)
    env = child_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "stoppable.py"), str(tmp_path)],
                            env=env, cwd=tmp_path)
    pid_file = tmp_path / "results.sweep0.pid"
    deadline = time.monotonic() + 120
    while not pid_file.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert pid_file.exists(), "the worker did not start"
    worker = int(pid_file.read_text())
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == (-sig if sig == signal.SIGKILL else 100 + sig)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(worker, signal.SIGKILL)
        raise AssertionError(f"worker {worker} outlived the stopped sweep")
    assert (tmp_path / "results.sweep0.progress").read_text() == "slow"  # for --resume


def test_a_second_sweep_into_a_folder_in_use_is_refused_and_touches_nothing(tmp_path, capsys):
    """The sweep holds the report directory's lock (as `gradcheck run` does): a second sweep (or
    run) into it is a usage error naming the holder, and the first one's files stay as they
    were; once released, the same command runs."""
    from gradcheck.cli import main
    from gradcheck.plugin.session_report import ReportDirLock

    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("the first sweep's stream\n")
    holder = ReportDirLock(out).acquire()
    try:
        code = main(["sweep", "--backend", "jax", "--op", "jax.nn.soft_sign", "--report-dir",
                     str(out)])
        assert code == 2
        assert "is in use by another gradcheck run (pid " in capsys.readouterr().err
        assert (out / "results.jsonl").read_text() == "the first sweep's stream\n"
        assert sorted(p.name for p in out.iterdir()) == [".gradcheck.lock", "results.jsonl"]
    finally:
        holder.release()
    code = main(["sweep", "--backend", "jax", "--op", "jax.nn.soft_sign", "--profile", "quick",
                 "--report-dir", str(out)])
    assert code in (0, 1)
    assert "jax.nn.soft_sign" in (out / "index.html").read_text()
    assert not (out / ".gradcheck.lock").exists()  # released after the sweep


def test_a_full_disk_during_a_sweep_is_an_error_naming_the_stream(tmp_path):
    from gradcheck.core.errors import WriteFailed
    from tests.support.disk import tmpfs

    twin = next(o for o in _ops() if o.name == "twin.torch_sin")
    with tmpfs(tmp_path / "disk", size="64k", leave=4096) as disk:
        # before: the sweep returned as if complete, its stream cut short
        with pytest.raises(WriteFailed, match=r"cannot write '.*/results\.jsonl': No space"):
            sweep(QUICK, disk, extra_ops=[twin])
