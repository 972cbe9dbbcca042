"""Our L-BFGS (streammn.network.lbfgs) against scipy's L-BFGS-B on the same objectives and
tolerances."""

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der

from streammn.network.lbfgs import _interpolate, minimise


def scipy_fit(fun, x0, max_iter, ftol, gtol=1e-10):
    options = {"maxiter": max_iter, "ftol": ftol, "gtol": gtol, "maxcor": 10}
    return minimize(fun, x0, jac=True, method="L-BFGS-B", options=options)


def rosenbrock(x):
    return rosen(x), rosen_der(x)


def logistic(seed=0, n=2000, d=50):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + rng.normal(size=n) > 0

    def fun(w):
        z = X @ w
        p = 1 / (1 + np.exp(-z))
        value = np.sum(np.logaddexp(0, z) - y * z) / n + 0.05 * (w @ w) / n
        return value, X.T @ (p - y) / n + 0.1 * w / n

    return fun, d


@pytest.mark.parametrize("n", [2, 10, 50])
def test_rosenbrock_reaches_the_minimum_as_scipy_does(n):
    x0 = np.full(n, -1.2)
    x, info = minimise(rosenbrock, x0, 2000, 1e-14, gtol=1e-9)
    ref = scipy_fit(rosenbrock, x0, 2000, 1e-14, gtol=1e-9)
    assert info["converged"] and ref.success
    np.testing.assert_allclose(x, np.ones(n), atol=1e-4)
    assert info["objective"] < 1e-10 and ref.fun < 1e-10
    assert info["evaluations"] < 1.5 * ref.nfev + 10  # about as much work


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_convex_fit_ends_where_scipy_ends(seed):
    fun, d = logistic(seed)
    x, info = minimise(fun, np.zeros(d), 100, 1e-7)
    ref = scipy_fit(fun, np.zeros(d), 100, 1e-7)
    assert info["converged"]
    assert info["objective"] == pytest.approx(ref.fun, rel=1e-9)
    np.testing.assert_allclose(x, ref.x, atol=1e-4)


def test_the_evaluation_budget_is_kept_and_the_point_improves():
    fun, d = logistic()
    start = fun(np.zeros(d))[0]
    for budget in (1, 2, 3, 5, 8):
        x, info = minimise(fun, np.zeros(d), 100, 1e-12, max_evaluations=budget)
        assert info["evaluations"] <= budget
        assert info["objective"] == pytest.approx(fun(x)[0])
        assert info["objective"] < start or budget == 1
        assert not info["converged"]


def test_the_iteration_limit_is_kept():
    x, info = minimise(rosenbrock, np.full(10, -1.2), 7, 1e-14)
    assert info["iterations"] == 7 and not info["converged"]
    assert "iteration limit" in info["message"]


def test_a_start_where_the_objective_is_not_finite_is_returned_unconverged():
    x0 = np.array([np.nan, 1.0])
    x, info = minimise(lambda x: (float(x @ x), 2 * x), x0, 10, 1e-9)
    assert not info["converged"] and "not finite" in info["message"]
    assert info["evaluations"] == 1 and np.isnan(x[0])


def test_an_overflowing_trial_step_is_backed_off():
    """exp overflows far from the minimum: the line search shrinks instead of failing."""

    def fun(x):
        with np.errstate(over="ignore"):
            e = np.exp(x)
        return float(np.sum(e - 2 * x)), e - 2

    x, info = minimise(fun, np.full(3, -50.0), 200, 1e-14)
    assert info["converged"]
    np.testing.assert_allclose(x, np.log(2.0), atol=1e-5)


def test_a_minimum_at_the_start_stops_at_once():
    x, info = minimise(lambda x: (float(x @ x), 2 * x), np.zeros(4), 10, 1e-9)
    assert info["converged"] and info["iterations"] == 0 and info["evaluations"] == 1


def test_the_cubic_step_is_exact_on_a_quadratic():
    # phi(a) = (a - 1)^2: values and slopes at 0 and 3 give the minimiser 1
    assert _interpolate((0.0, 1.0, -2.0), (3.0, 4.0, 4.0)) == pytest.approx(1.0)
    # the bracket may be given high end first; the step stays strictly inside
    step = _interpolate((3.0, 4.0, 4.0), (0.0, 1.0, -2.0))
    assert 0.0 < step < 3.0
