"""Numeric gradient checks: projected VJP/JVP against the FD oracle, cross-mode, order 2.

For each differentiable input ``j`` and floating output ``i`` and each of ``probes`` random
Gaussian pairs ``(v, u)`` we compare three scalars:

* ``<v, (J u)_FD>``  from the oracle (:mod:`gradcheck.oracle.fd`, one batched call per input),
* ``<J^T v, u>``     from the backend's reverse mode (VJP check),
* ``<v, J u>``       from the backend's forward mode (JVP check),

and, between the two AD values, the forward-vs-reverse check (rounding bound only).  The cost
does not depend on the input size.  When a projected check fails the block ``J_ij`` is
localized with the full Jacobian and the worst elements are reported.

A low-precision dtype is checked in two parts (docs/error-model.md s.4): the *rule* in float64 at
the point rounded to that dtype (tight), and the *rounding* of the dtype's VJP against the
backend's own float64 VJP (norm-wise, with measured noise: :mod:`gradcheck.numeric.rounding`).

The pipeline, one module per stage (every stage typed, every result created once):

* :mod:`.context`: :class:`CheckConfig`, the :class:`~.context.Recorder` of results, the
  frozen :class:`~.context.Prepared` state, :class:`~.context.Finished`;
* :mod:`.prepare`: :func:`~.prepare.prepare` -> ``Prepared | Finished`` (evaluation at the
  point: purity, determinism, shapes, non-finite, complex and empty outputs);
* :mod:`.probes`: the seeded probes, the oracle's batched function;
* :mod:`.stages`: the samples, each through the adapter boundary
  (:mod:`gradcheck.backends.guarded`): :func:`~.stages.estimates` (the oracle),
  :func:`~.stages.reverse`, :func:`~.stages.alternatives`, :func:`~.stages.forward`,
  :func:`~.stages.rounding_samples`, typed samples or typed adapter failures;
* :mod:`.scalars`: the samples projected on the probes (:class:`~.scalars.FdSide`);
* :mod:`.judge`: a frozen :class:`~.judge.Comparison` judged by the pure
  :func:`~.judge.judge` into a :class:`~.judge.Verdict`;
* :mod:`.localize`: on a failure, the full Jacobian block (:class:`~.localize.Localization`);
* :mod:`.compare`: the comparisons of one (output, input) pair, recorded;
* :mod:`.first_order`: the screen (:mod:`gradcheck.numeric.screen`) or the full checks, with
  the second estimate (:mod:`gradcheck.numeric.second_estimate`);
* :mod:`.order2`: the order-2 kinds, recorded as such (:class:`~.context.Relabel`);
* :mod:`.run`: :func:`run_numeric_checks`, the entry point (with NumPy's huge-page hint off,
  :mod:`.pages`).
"""

from gradcheck.numeric.context import CheckConfig
from gradcheck.numeric.run import run_numeric_checks

__all__ = ["CheckConfig", "run_numeric_checks"]
