"""The wheel installs like a library: ``reference/`` and ``suites/`` ship inside the package as
``gradcheck.reference`` and ``gradcheck.suites`` (nothing top-level), and a non-editable install
runs ``gradcheck run`` from any folder."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from gradcheck import stream

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> tuple[set[str], dict[str, str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(setuptools["packages"]), setuptools["package-dir"]


def test_every_package_folder_is_declared_in_pyproject():
    declared, dirs = _declared()
    found = set()
    for prefix, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((prefix, *rel)))
    assert found == declared


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(ROOT)], check=True,
                   capture_output=True, timeout=300)
    (whl,) = out.glob("gradcheck-*.whl")
    return whl


def test_the_wheel_ships_reference_and_suites_inside_the_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"gradcheck", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}"
                    ".dist-info"}
    for expected in ("gradcheck/reference/numpy/__init__.py",
                     "gradcheck/engines/jax/ops/unary.py", "gradcheck/suites/test_numeric.py",
                     "gradcheck/suites/test_semantics.py", "gradcheck/report/assets/report.js",
                     "gradcheck/py.typed"):
        assert expected in names, expected


def test_a_non_editable_install_runs_the_suites_from_another_folder(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", str(site), str(wheel)], check=True, capture_output=True,
                   timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and k != stream.ENV_VAR}
    env["PYTHONPATH"] = str(site)  # the installed copy, not the checkout
    probe = subprocess.run(
        [sys.executable, "-c", "import gradcheck, gradcheck.reference.numpy as r, "
         "gradcheck.cli as c; print(gradcheck.__file__); print(r.__file__); "
         "print(c.find_suites())"], cwd=elsewhere, env=env, capture_output=True, text=True,
        check=True)
    for line in probe.stdout.split():
        assert line.startswith(str(site)), probe.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "gradcheck.cli", "run", "--backend", "numpy", "--op", "tanh",
         "--report-dir", "out"], cwd=elsewhere, env=env, capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = stream.read_streams([elsewhere / "out" / "results.jsonl"])
    assert {c.name for c in data.checks if c.kind == "vjp"} == {"tanh"}
    assert all(c.backend == "numpy" for c in data.checks if c.kind != "semantic")


# the engines and libraries whose behaviour the known discrepancies and the tests record: a
# fresh machine must get exactly what CI tested (an open range once gave a machine a jax the
# records did not describe)
_RECORDED = ("torch", "jax", "jaxlib", "numpy", "scipy", "mpmath", "hypothesis")


def _all_extra_pins() -> dict[str, str]:
    import re

    with open(ROOT / "pyproject.toml", "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    pins = {}
    for spec in extras["all"]:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?==([0-9][0-9A-Za-z.+]*)", spec)
        if m:
            pins[m.group(1).lower()] = m.group(3)
    return pins


def test_the_recorded_engines_are_pinned_exactly_in_the_all_extra():
    pins = _all_extra_pins()
    assert not [name for name in _RECORDED if name not in pins], pins


@pytest.mark.parametrize("name", _RECORDED)
def test_the_installed_version_is_the_pinned_one(name):
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(name)
    except PackageNotFoundError:
        pytest.skip(f"{name} is not installed")
    pinned = _all_extra_pins()[name]
    # torch reports its build ("2.13.0+cu130"): the pin names the release
    assert installed.split("+")[0] == pinned, (
        f"{name} {installed} is installed but pyproject.toml's `all` extra pins {pinned}: the "
        f"known discrepancies and the tests record {pinned}; reinstall with "
        f"pip install -e '.[all,dev]'")
