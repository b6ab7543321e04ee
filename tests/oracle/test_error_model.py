"""The ErrorModel (gradcheck.oracle.error_model): the default reproduces the free functions it
replaced
bit for bit, its arithmetic is vectorised, a profile is validated and reaches CheckConfig and
the reproducer of :func:`gradcheck.check`."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import gradcheck
from gradcheck import ErrorModel
from gradcheck.oracle import error_model as tolerance

EPS64 = float(np.finfo(np.float64).eps)

# -- the formulas as gradcheck/oracle/error_model.py wrote them before the ErrorModel (main at
# 02e5630),
# -- literally, constants inlined: the default model must give the same bits

_OLD_FD_SAFETY, _OLD_GAMMA, _OLD_NOISE, _OLD_RESOLUTION, _OLD_CAP = 10.0, 16.0, 4.0, 1e-2, 10.0


def _old_model_allowance(fd_error, magnitude, dtype, *, conditioning=0.0, measured=0.0):
    safety, gamma = _OLD_FD_SAFETY, _OLD_GAMMA
    e = tolerance.eps(dtype)
    rounding = gamma * e * (magnitude + conditioning)
    allowed = safety * fd_error + rounding + measured
    parts = []
    if fd_error:
        parts.append(f"{safety:g} x FD error {fd_error:.3g}")
    cond = f" + conditioning {conditioning:.3g}" if conditioning else ""
    parts.append(f"{gamma:g} x eps({dtype}) x (sum of |terms| {magnitude:.3g}{cond})")
    if measured:
        parts.append(f"measured rounding of the judging side beyond its share {measured:.3g}")
    return allowed, " + ".join(parts) + f" = {allowed:.3g}"


def _old_rounding_allowance(norm, conditioning, noise, dtype):
    gamma, noise_factor = _OLD_GAMMA, _OLD_NOISE
    e = tolerance.eps(dtype)
    allowed = gamma * e * (norm + conditioning) + noise_factor * noise
    cond = f" + conditioning {conditioning:.3g}" if conditioning else ""
    src = f"{gamma:g} x eps({dtype}) x (||VJP|| {norm:.3g}{cond})"
    if noise:
        src += f" + {noise_factor:g} x measured rounding noise {noise:.3g}"
    return allowed, f"{src} = {allowed:.3g}"


def _old_estimates_agree(v1, e1, v2, e2, terms):
    with np.errstate(invalid="ignore"):
        return np.abs(v1 - v2) <= _OLD_FD_SAFETY * (e1 + e2) + _OLD_GAMMA * EPS64 * terms


def _old_resolved(model_allowed, terms, *, fd_error=0.0, rounding_floor=0.0):
    if not np.isfinite(model_allowed):
        return False
    return bool(terms == 0 or model_allowed <= _OLD_RESOLUTION * terms
                or 0 < fd_error <= rounding_floor)


def _old_rounding_level(discrepancy, terms, unit, dtype):
    level = (_OLD_GAMMA / _OLD_RESOLUTION) * tolerance.eps(dtype) * max(float(terms),
                                                                          float(unit))
    return level if np.isfinite(level) and 0 < discrepancy <= level else None


def _old_fd_rounding_floor(v, f, value, curvature, h_max, h_min):
    h_max, h_min = np.float64(h_max), np.float64(h_min)
    with np.errstate(all="ignore"):
        s = np.abs(f) + h_max * np.abs(value) + 0.5 * h_max * h_max * np.abs(curvature)
        floor = _OLD_GAMMA * EPS64 * float(np.sum(np.abs(v) * np.where(np.isfinite(s), s,
                                                                         0.0)) / h_min)
    return floor if np.isfinite(floor) else 0.0


def _old_amplification(curvature, ju):
    with np.errstate(all="ignore"):
        r = np.abs(curvature) / np.abs(ju)
    r = np.where(np.isfinite(r), r, 0.0)
    if r.size:
        r = np.minimum(r, _OLD_CAP * float(np.median(r)))
    return r


# values of every size a comparison meets: exact zeros, subnormal-ish, ordinary, huge, inf
_GRID = (0.0, 5e-324, 1e-300, 2.3e-17, 1.92e-14, 1e-12, 0.37, 1.0, 8.45, 3e5, 1e200,
         float("inf"))
_DTYPES = ("float64", "float32", "float16", "bfloat16")


def _bits(x) -> bytes:
    return np.asarray(x, dtype=np.float64).tobytes()


def test_the_default_model_has_the_documented_constants():
    m = ErrorModel()
    assert (m.fd_safety, m.rounding_gamma, m.noise_factor, m.resolution, m.conditioning_cap) \
        == (_OLD_FD_SAFETY, _OLD_GAMMA, _OLD_NOISE, _OLD_RESOLUTION, _OLD_CAP)
    assert m == tolerance.DEFAULT_MODEL
    assert (tolerance.FD_SAFETY, tolerance.ROUNDING_GAMMA, tolerance.NOISE_FACTOR,
            tolerance.RESOLUTION, tolerance.ROUNDING_LEVEL) == (10.0, 16.0, 4.0, 1e-2, 1600.0)


@pytest.mark.parametrize("dtype", _DTYPES)
def test_the_default_model_reproduces_the_old_allowance_bit_for_bit(dtype):
    m = ErrorModel()
    small = (0.0, 1e-300, 1.92e-14, 0.37, 8.45, 1e200)
    for fd_error, terms, cond, measured in itertools.product(_GRID, _GRID, small, small[:3]):
        want, want_src = _old_model_allowance(fd_error, terms, dtype, conditioning=cond,
                                              measured=measured)
        got = m.allowance(fd_error, terms, dtype, conditioning=cond, measured=measured)
        assert _bits(got.allowed) == _bits(want), (fd_error, terms, cond, measured)
        assert got.source == want_src
        assert m.explain(fd_error, terms, dtype, conditioning=cond, measured=measured) \
            == want_src
        # the thin wrappers other modules call are the same model
        assert tolerance.model_allowance(fd_error, terms, dtype, conditioning=cond,
                                         measured=measured) == got
        assert tolerance.allowance(1.0, fd_error, terms, dtype, conditioning=cond,
                                   measured=measured) == got


@pytest.mark.parametrize("dtype", _DTYPES)
def test_the_default_model_reproduces_the_old_rounding_check_bit_for_bit(dtype):
    m = ErrorModel()
    for norm, cond, noise in itertools.product(_GRID, _GRID[:8], _GRID[:8]):
        want, want_src = _old_rounding_allowance(norm, cond, noise, dtype)
        got = m.norm_allowance(norm, cond, noise, dtype)
        assert _bits(got.allowed) == _bits(want) and got.source == want_src
        assert tolerance.rounding_allowance(norm, cond, noise, dtype) == got


def test_the_default_model_reproduces_the_old_verdict_helpers_bit_for_bit():
    m = ErrorModel()
    rng = np.random.default_rng(0)
    g = np.array(_GRID[:-1])
    v1, v2 = rng.standard_normal((2, 500)) * rng.choice(g, (2, 500))
    e1, e2, terms = np.abs(rng.standard_normal((3, 500))) * rng.choice(g, (3, 500))
    np.testing.assert_array_equal(m.estimates_agree(v1, e1, v2, e2, terms),
                                  _old_estimates_agree(v1, e1, v2, e2, terms))
    np.testing.assert_array_equal(tolerance.estimates_agree(v1, e1, v2, e2, terms),
                                  _old_estimates_agree(v1, e1, v2, e2, terms))
    for a, t, fe, floor in itertools.product(_GRID + (float("nan"),), _GRID, _GRID[:6],
                                             _GRID[:6]):
        assert m.resolved(a, t, fd_error=fe, rounding_floor=floor) \
            == _old_resolved(a, t, fd_error=fe, rounding_floor=floor)
    for d, t, u, dtype in itertools.product(_GRID, _GRID, (0.0, 1.0, 3e5), _DTYPES):
        got, want = m.rounding_level(d, t, u, dtype), _old_rounding_level(d, t, u, dtype)
        assert (got is None and want is None) or _bits(got) == _bits(want)
    for h_max, h_min in ((1e-3, 1e-5), (1e200, 1e198), (1.0, 5e-324)):
        args = (rng.standard_normal(7), rng.standard_normal(7) * 1e3, rng.standard_normal(7),
                rng.standard_normal(7), h_max, h_min)
        assert _bits(m.fd_rounding_floor(*args)) == _bits(_old_fd_rounding_floor(*args))
        assert _bits(tolerance.fd_rounding_floor(*args)) == _bits(_old_fd_rounding_floor(*args))
    curv, ju = rng.standard_normal(300) * 1e3, rng.standard_normal(300)
    ju[::17] = 0.0
    np.testing.assert_array_equal(m.amplification(curv, ju), _old_amplification(curv, ju))


def test_allowed_is_vectorised_and_equals_the_scalar_allowance_elementwise():
    m = ErrorModel(fd_safety=3.0, rounding_gamma=40.0)
    rng = np.random.default_rng(1)
    fd_error, terms, cond, measured = np.abs(rng.standard_normal((4, 6, 5))) * 1e-9
    got = m.allowed(fd_error, terms, "float32", conditioning=cond, measured=measured)
    assert got.shape == (6, 5)
    for idx in np.ndindex(got.shape):
        one = m.allowance(float(fd_error[idx]), float(terms[idx]), "float32",
                          conditioning=float(cond[idx]), measured=float(measured[idx]))
        assert _bits(got[idx]) == _bits(one.allowed)
    # broadcasting: one FD error per row against a column of terms
    wide = m.allowed(fd_error[:, :1], terms[:1, :])
    assert wide.shape == (6, 5)
    np.testing.assert_array_equal(wide, 3.0 * fd_error[:, :1] + 40.0 * EPS64 * terms[:1, :])
    assert isinstance(m.allowed(1e-12, 2.0), float)  # floats in, a float out


def test_a_profile_changes_every_part_and_its_explanation_says_so():
    m = ErrorModel(fd_safety=3.0, rounding_gamma=64.0, noise_factor=2.0, resolution=0.1)
    assert m.fd_bound(2.0) == 6.0 and m.noise_bound(2.0) == 4.0
    assert m.rounding(1.0, "float32") == 64.0 * float(np.finfo(np.float32).eps)
    a = m.allowance(1e-12, 3.0, "float64")
    assert a.allowed == 3.0 * 1e-12 + 64.0 * EPS64 * 3.0
    assert a.source.startswith("3 x FD error 1e-12 + 64 x eps(float64) x (sum of |terms| 3)")
    assert "2 x measured rounding noise" in m.norm_allowance(1.0, 0.0, 1e-6, "float32").source
    assert m.resolved(0.09, 1.0) and not ErrorModel().resolved(0.09, 1.0)
    assert m.rounding_level_factor == 640.0


@pytest.mark.parametrize("field,bad", [
    ("fd_safety", 0.0), ("fd_safety", -1.0), ("rounding_gamma", float("nan")),
    ("noise_factor", float("inf")), ("conditioning_cap", True), ("fd_safety", "10"),
    ("resolution", 1.5), ("resolution", 0.0),
])
def test_an_invalid_constant_is_rejected_naming_it(field, bad):
    with pytest.raises(ValueError, match=f"ErrorModel\\({field}="):
        ErrorModel(**{field: bad})


def test_the_model_is_frozen_hashable_and_its_repr_names_what_differs():
    m = ErrorModel(fd_safety=3)
    assert m.fd_safety == 3.0 and isinstance(m.fd_safety, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.fd_safety = 1.0  # type: ignore[misc]
    assert hash(m) == hash(ErrorModel(fd_safety=3.0))
    assert repr(m) == "ErrorModel(fd_safety=3.0)" and repr(ErrorModel()) == "ErrorModel()"
    assert eval(f"gradcheck.{m!r}", {"gradcheck": gradcheck}) == m
    assert gradcheck.ErrorModel.__module__ == "gradcheck"


def _sin():
    return gradcheck.NumpyFunction(np.sin, lambda a, c: [c[0] * np.cos(a[0])],
                                   lambda a, t: [t[0] * np.cos(a[0])], name="sin")


@pytest.mark.parametrize("bad", ["strict", 10.0, {"fd_safety": 3.0}, object()])
def test_check_rejects_an_error_model_that_is_not_one(bad):
    with pytest.raises(gradcheck.InvalidArgument, match="error_model=.*gradcheck.ErrorModel"):
        gradcheck.check(_sin(), np.ones(2), backend="numpy", error_model=bad)


def test_check_threads_the_profile_into_its_config_and_reproducer(monkeypatch):
    from gradcheck import api

    seen = []

    def capture(backend, fn, inputs, *, device, dtype, config):
        seen.append(config)
        return []

    monkeypatch.setattr(api, "run_numeric_checks", capture)
    strict = ErrorModel(fd_safety=3.0)
    gradcheck.check(_sin(), np.ones(2), backend="numpy", error_model=strict)
    gradcheck.check(_sin(), np.ones(2), backend="numpy")
    assert seen[0].error_model is strict
    assert "error_model=gradcheck.ErrorModel(fd_safety=3.0)" in seen[0].reproducer
    assert seen[1].error_model == ErrorModel() and "error_model" not in seen[1].reproducer


def test_the_sites_that_retyped_the_formula_get_the_same_bits_from_the_model():
    """What each converted site computed inline before (main at 02e5630), against the model
    method it calls now, on arrays of every size."""
    from gradcheck.oracle import jacobian as _jacobian

    m = ErrorModel()
    rng = np.random.default_rng(2)
    g = np.array(_GRID[:-1])
    a, b = rng.standard_normal((2, 400)) * rng.choice(g, (2, 400))
    err, mag = np.abs(rng.standard_normal((2, 400))) * rng.choice(g, (2, 400))
    e32 = float(np.finfo(np.float32).eps)
    same = np.testing.assert_array_equal
    # oracle.jacobian._allowed (localization), agreement._worst (two engines' elements)
    same(_jacobian._allowed(err, a, b),
         _OLD_FD_SAFETY * err + _OLD_GAMMA * EPS64 * (np.abs(a) + np.abs(b)))
    same(_jacobian._allowed(err, a, 0.0),
         _OLD_FD_SAFETY * err + _OLD_GAMMA * EPS64 * (np.abs(a) + np.abs(0.0)))
    same(m.rounding(np.abs(a) + np.abs(b)), _OLD_GAMMA * EPS64 * (np.abs(a) + np.abs(b)))
    # _probing.assess (every semantic and audit comparison), in each dtype
    for dtype in _DTYPES:
        same(m.allowed(err, mag, dtype),
             _OLD_FD_SAFETY * err + _OLD_GAMMA * tolerance.eps(dtype) * mag)
    # audit / model_flow: an FD value told from 0; agreement / _path_noise: measured noise
    same(m.fd_bound(err), _OLD_FD_SAFETY * err)
    assert m.fd_bound(float(err[3])) == 10.0 * float(err[3])
    same(m.noise_bound(mag), _OLD_NOISE * mag)
    # _audit_steps: a declared tie kept to float32 rounding
    same(m.rounding(np.abs(a) + 1e-30, "float32"), 16 * np.finfo(np.float32).eps
         * (np.abs(a) + 1e-30))
    assert m.rounding(1.0, "float32") == 16 * e32


def test_the_oracle_tuning_fields_keep_the_module_constants_values_and_counts_stay_ints():
    from gradcheck.numeric import scaled_estimate as _scaled_estimate
    from gradcheck.oracle import _stencil, fd, jacobian

    m = ErrorModel()
    assert (fd.DEFAULT_LEVELS, fd.CONVERGED_RTOL, fd.SCREEN_LEVELS, fd.SCALED_KINK) == (
        m.fd_levels, m.fd_converged_rtol, m.screen_levels, m.scaled_kink) == (7, 1e-8, 4, 1e-3)
    assert (_scaled_estimate.SHARP, _scaled_estimate.POINTS, _stencil._H_FACTOR,
            jacobian._LEAF) == (1e-5, 3072, 2.0**-6, 4)
    assert (m.screen_floor, m.second_shrink, m.alternative_probes) == (1e-11, 2.0**-8, 1)
    assert isinstance(m.fd_levels, int) and isinstance(m.localize_max_columns, int)
    assert ErrorModel(rounding_samples=5).rounding_samples == 5
    assert repr(ErrorModel(sharp=1e-4)) == "ErrorModel(sharp=0.0001)"
    for bad in (0, 2.5, True, "3"):
        with pytest.raises(ValueError, match="ErrorModel\\(rounding_samples="):
            ErrorModel(rounding_samples=bad)
