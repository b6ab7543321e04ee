"""Day one at the user's edge (issue 29, items 7-10), through the public API, the pytest plugin
and the command line only: reproducers that run, expected failures that do not break CI,
Hypothesis strategies for the user's own ops, a fast ``gradcheck backends``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gradcheck
from gradcheck import GradientMismatch

ROOT = Path(__file__).resolve().parents[2]

# -- item 7: reproducers that run --------------------------------------------------------------


def _script_of(message: str) -> tuple[str, str]:
    """(heading, script) of the first result of a failure message: the script is printed
    last, unindented, after its heading line."""
    lines = message.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.strip().startswith("reproduce ("))
    end = next((i for i in range(k + 1, len(lines)) if lines[i].startswith("* ")), len(lines))
    return lines[k].strip(), "\n".join(lines[k + 1:end]).rstrip()


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != gradcheck.stream.ENV_VAR}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def _closure(wrong: float):
    """A user's op built inside a function: a lambda closing over a value (no importable
    name); ``wrong`` != 0 scales the gradient by (1 + wrong), the value stays exact."""
    torch = pytest.importorskip("torch")
    k = 1.0 + wrong

    return lambda t: (torch.sin(t) * k - torch.sin(t).detach() * (k - 1.0)).sum()


@pytest.mark.parametrize("size", [5, 300], ids=["inline", "npz"])
def test_printed_reproducer_of_a_wrong_closure_fails_as_printed(size, tmp_path):
    x = np.linspace(0.1, 1.3, size)
    with gradcheck.stream.using(tmp_path / "results.jsonl"):  # a report directory
        with pytest.raises(GradientMismatch) as info:
            gradcheck.assert_gradients(_closure(0.01), x, backend="torch", modes=("rev",))
        good = gradcheck.check(_closure(0.0), x, backend="torch", modes=("rev",))
    assert good.passed  # the correct twin
    message = str(info.value)
    heading, script = _script_of(message)
    assert heading == "reproduce (a script, runs as printed):"
    assert "NotImplementedError" not in script and "random" not in script
    assert "fn = lambda t: (torch.sin(t) * k - torch.sin(t).detach() * (k - 1.0)).sum()" in script
    if size > 128:  # the exact inputs, in a file beside the results, its path in the message
        npz = next(tmp_path.glob("reproducers/inputs-*.npz"))
        assert repr(str(npz)) in message and np.array_equal(np.load(npz)["input_0"], x)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = _run(script, elsewhere)
    assert out.returncode == 1, out.stderr  # it fails, with the same mismatch
    first = message.splitlines()[:4]
    assert out.stdout.splitlines()[:4] == first and "gradient check failed" in first[0]


def test_a_reproducer_that_needs_the_users_object_says_so_and_does_not_claim_to_run(tmp_path):
    torch = pytest.importorskip("torch")
    layer = torch.nn.Linear(3, 2).double()
    with pytest.raises(GradientMismatch) as info:
        gradcheck.assert_gradients(lambda t: layer(t) + t.detach()[:2] * 0.01 * t[:2],
                                   np.ones(3), backend="torch", modes=("rev",))
    heading, script = _script_of(str(info.value))
    assert heading == "reproduce (a script: define what it marks PASTE HERE, then run it):"
    assert script.startswith("# NOT RUNNABLE AS PRINTED")
    assert "# PASTE HERE: layer: the torch.nn.modules.linear.Linear the function refers to" \
        in script
    out = _run(script, tmp_path)  # as printed: it stops and says what to define
    assert out.returncode != 0 and "define layer where this script says PASTE HERE" in out.stderr
