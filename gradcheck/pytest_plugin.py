"""The gradcheck pytest plugin: options, profiles, parametrization (kept thin).

A suite test asks for the ``gradcheck_case`` fixture and says which check it runs::

    @pytest.mark.gradcheck(check="vjp")
    def test_vjp(gradcheck_case):
        assert_check(gradcheck_case)

and the plugin parametrizes it over backend x device x dtype x op (x special point) with ids
such as ``test_vjp[torch-cpu-float64-atan2]`` (see :mod:`gradcheck.harness.plan`).  An op a
backend lacks and an absent device become skips with the reason; a known discrepancy from the
op's spec becomes a strict xfail.  Selection comes from the command line or from the ini
(``pyproject.toml`` ``[tool.pytest.ini_options]``), the command line winning.  State lives in
``config.stash``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from gradcheck.core.errors import InvalidArgument

PROFILES = ("quick", "ci", "thorough")
_HYPOTHESIS_PROFILES: dict[str, dict[str, Any]] = {
    # derandomized and deadline-free: CI runs are reproducible and never flaky on timing
    "quick": dict(max_examples=3, derandomize=True, deadline=None, database=None),
    "ci": dict(max_examples=2, derandomize=True, deadline=None, database=None),
    "thorough": dict(max_examples=40, deadline=None),
}


@dataclass(frozen=True)
class Settings:
    """The resolved gradcheck options of this pytest run."""

    profile: str
    backends: tuple[str, ...] | None
    devices: tuple[str, ...] | None
    dtypes: tuple[str, ...] | None
    ops: tuple[str, ...] | None
    report_dir: str | None


SETTINGS_KEY = pytest.StashKey[Settings]()


@dataclass
class _PlanTally:
    """What the suite tests of this process planned: runnable cases and skip reasons."""

    requested: int = 0  # suite test functions parametrized (gradcheck_case)
    runnable: int = 0
    skips: Counter = field(default_factory=Counter)


_PLAN_TALLY_KEY = pytest.StashKey[_PlanTally]()

# the report hooks (streams, shards, xdist merge, HTML/JUnit) load with this plugin; they must be
# registered before the command line is parsed (not from pytest_configure) for their options
# known_marker first: session_report imports it, and pytest can only rewrite (and registers
# without a warning) a plugin module it imports itself
pytest_plugins = ["gradcheck.plugin.known_marker", "gradcheck.plugin.session_report",
                  "gradcheck.plugin.progress"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradient checking")
    group.addoption("--gradcheck-backend", action="append", default=None,
                    help="backend(s) to run the suites on: a name or 'package.module:Attr' "
                         "(repeatable; default: numpy, torch and jax where installed)")
    group.addoption("--gradcheck-device", action="append", default=None,
                    help="device(s), e.g. cpu, cuda, gpu, cpu:1 (repeatable; default: cpu and "
                         "each backend's GPU, skipped where absent)")
    group.addoption("--gradcheck-dtype", action="append", default=None,
                    help="dtype(s) to check (repeatable; default: float64 and float32)")
    group.addoption("--gradcheck-op", action="append", default=None,
                    help="only ops whose name contains this text or matches this glob "
                         "(repeatable)")
    group.addoption("--gradcheck-profile", choices=PROFILES, default=None,
                    help="suite size: quick (default), ci, thorough")
    group.addoption("--gradcheck-report-dir", default=None,
                    help="directory for results.jsonl and index.html")
    parser.addini("gradcheck_profile", "default suite profile (quick, ci, thorough)",
                  default="quick")
    parser.addini("gradcheck_backend", "backends to run the suites on", type="args", default=[])
    parser.addini("gradcheck_device", "devices to run the suites on", type="args", default=[])
    parser.addini("gradcheck_dtype", "dtypes to check", type="args", default=[])
    parser.addini("gradcheck_op", "op name filters (substring or glob)", type="args",
                  default=[])


def _setting(config: pytest.Config, name: str) -> tuple[str, ...] | None:
    values = config.getoption(f"--gradcheck-{name}") or config.getini(f"gradcheck_{name}")
    return tuple(values) if values else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gradcheck(check): a suite test parametrized over "
                                       "backend x device x dtype x op by the gradcheck plugin")
    profile = config.getoption("--gradcheck-profile") or config.getini("gradcheck_profile")
    if profile not in PROFILES:
        raise pytest.UsageError(f"gradcheck_profile={profile!r} is not valid; choose one of: "
                                f"{', '.join(PROFILES)}")
    config.stash[SETTINGS_KEY] = Settings(
        profile=profile, backends=_setting(config, "backend"), devices=_setting(config, "device"),
        dtypes=_setting(config, "dtype"), ops=_setting(config, "op"),
        report_dir=config.getoption("--gradcheck-report-dir"))
    _register_hypothesis_profiles(profile)
    if getattr(config, "workerinput", None) is None:
        config.pluginmanager.register(_SelectionErrorWatch(), "gradcheck-selection-errors")
    try:
        from gradcheck.plugin import session_report
    except ImportError as exc:  # only "the report module is absent" is silent
        if exc.name != "gradcheck.plugin.session_report":
            raise
        return
    if not config.pluginmanager.is_registered(session_report):
        config.pluginmanager.register(session_report, "gradcheck-report")


def _register_hypothesis_profiles(active: str) -> None:
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # pragma: no cover - hypothesis is a dependency
        return
    for name, kw in _HYPOTHESIS_PROFILES.items():
        settings.register_profile(f"gradcheck-{name}", suppress_health_check=list(HealthCheck),
                                  **kw)


def settings_of(config: pytest.Config) -> Settings:
    """The :class:`Settings` of this run (from ``config.stash``)."""
    return config.stash[SETTINGS_KEY]


def pytest_report_header(config: pytest.Config) -> str:
    s = settings_of(config)
    return (f"gradcheck: profile={s.profile} backends={','.join(s.backends or ['installed'])} "
            f"devices={','.join(s.devices or ['auto'])} dtypes={','.join(s.dtypes or ['auto'])}"
            + (f" ops={','.join(s.ops)}" if s.ops else ""))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gradcheck_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("gradcheck")
    if marker is None or "check" not in marker.kwargs:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: a test using gradcheck_case "
                                "needs @pytest.mark.gradcheck(check=...)")
    from gradcheck.harness.plan import Selection, plan

    s = settings_of(metafunc.config)
    sel = Selection(s.profile, s.backends, s.devices, s.dtypes, s.ops)
    try:
        planned = plan(marker.kwargs["check"], sel)
    except InvalidArgument as exc:
        raise pytest.UsageError(str(exc)) from exc
    tally = metafunc.config.stash.setdefault(_PLAN_TALLY_KEY, _PlanTally())
    tally.requested += 1
    tally.runnable += sum(1 for p in planned if not p.skip)
    tally.skips.update(p.skip for p in planned if p.skip)
    params = [pytest.param(p, id=p.id, marks=_marks(p)) for p in planned]
    metafunc.parametrize("gradcheck_case", params)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A selection (backend, device, dtype, op) under which the suite tests plan nothing to
    run is a usage error: a run that checked nothing must not pass.  An xdist worker cannot
    raise one (the controller would report a crashed worker): it reports a failed collection,
    which stops the run, and runs nothing."""
    message = _empty_plan_error(config)
    if not message:
        _order_suite_tests(items)
        return
    if getattr(config, "workerinput", None) is None:
        raise pytest.UsageError(message)
    items[:] = []
    report = pytest.CollectReport("", "failed", f"{_SELECTION_ERROR}{message}", [])
    config.hook.pytest_collectreport(report=report)


_SELECTION_ERROR = "UsageError: "


class _SelectionErrorWatch:
    """The xdist controller: a worker's selection error (above) makes the run a usage error
    (exit status 4) rather than a failure."""

    def __init__(self) -> None:
        self.seen = False

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and not report.nodeid and str(report.longrepr).startswith(
                _SELECTION_ERROR):
            self.seen = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.seen:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR


def _empty_plan_error(config: pytest.Config) -> str:
    tally = config.stash.get(_PLAN_TALLY_KEY, None)
    s = settings_of(config)
    filtered = any((s.backends, s.devices, s.dtypes, s.ops))
    if tally is None or not tally.requested or tally.runnable or not filtered:
        return ""
    from gradcheck.harness.plan import Selection
    from gradcheck.plugin.selection import empty_plan_message

    sel = Selection(s.profile, s.backends, s.devices, s.dtypes, s.ops)
    return empty_plan_message(sel, tally.skips, "--gradcheck-")


def _order_suite_tests(items: list[pytest.Item]) -> None:
    """Run the suite tests op by op and, within an op, case by case: every check kind of one
    case (``test_vjp[c]``, ``test_jvp[c]``, ``test_reference[c]``...) next to each other, then
    the op's next case (other dtype, special point, backend, cross-backend pair).  The check
    kinds of a case read one memoized run, which is then computed once and used while fresh;
    an engine's compiled transforms of the op (JAX) serve all its cases before the bounded
    cache drops them; and ``pytest-xdist``'s default ``load`` distribution, which hands out
    consecutive tests, keeps a case on one worker instead of recomputing it on both.  Ops
    and cases keep their first-seen order, tests of a case their file order, and every other
    test its place.  Deterministic, so every xdist worker collects the same order."""
    slots = [k for k, item in enumerate(items) if _case_of(item) is not None]
    if len(slots) < 2:
        return
    first: dict[str, int] = {}
    for k in slots:
        op, case = _case_of(items[k])  # type: ignore[misc]
        first.setdefault(op, k)
        first.setdefault(case, k)

    def key(item: pytest.Item) -> tuple[int, int]:
        op, case = _case_of(item)  # type: ignore[misc]
        return first[op], first[case]

    ordered = sorted((items[k] for k in slots), key=key)
    for k, item in zip(slots, ordered, strict=True):
        items[k] = item


def _case_of(item: pytest.Item) -> tuple[str, str] | None:
    """``("op:<name>", "<case id>/<order>")`` of a suite test, or None for any other test."""
    callspec = getattr(item, "callspec", None)
    planned = callspec.params.get("gradcheck_case") if callspec is not None else None
    case = getattr(planned, "case", None)  # an empty parametrization holds a NOTSET marker
    if case is None:
        return None
    return f"op:{case.op}", f"{case.id}/{getattr(planned, 'order', 1)}"


def _marks(p) -> list[pytest.MarkDecorator]:
    # tests of one case share one memoized run: `-n N --dist loadgroup` keeps them together
    group = pytest.mark.xdist_group(p.case.id.replace("@", "_"))
    if p.skip:
        return [pytest.mark.skip(reason=p.skip), group]
    if p.xfail:
        return [pytest.mark.xfail(strict=p.strict, reason=f"known discrepancy: {p.xfail}"),
                group]
    return [group]


@pytest.fixture
def gradcheck_settings(request: pytest.FixtureRequest) -> Settings:
    """The gradcheck options of this run."""
    return settings_of(request.config)


@pytest.fixture
def gradcheck_seed(request: pytest.FixtureRequest) -> int:
    """A seed derived from the test's id (stable across runs, processes and machines)."""
    from gradcheck.harness.runner import stable_seed

    return stable_seed(request.node.name)
