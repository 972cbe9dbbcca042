"""DN2MN: closed-form conversion of a dependency network into a Markov network (Lowd, UAI 2012).

For a base instance ``x'`` and a variable order ``o``, equation (4) of the paper writes
``P(x) / P(x')`` as a product over the variables of ratios of DN conditionals,
``P(x_i | x^(i)_-i) / P(x'_i | x^(i)_-i)``, where the variables before ``i`` in ``o`` are fixed to
``x'`` and those after ``i`` keep their values in ``x``. With a log-linear CPD each factor is a
set of conjunctive features: SIMPLIFYFEATURE (Table 2) conditions every CPD feature on the fixed
values (a violated fixed test removes it, a satisfied one is dropped), once for the numerator
(the test on ``X_i`` is kept) and once for the denominator (``X_i`` is also fixed to ``x'_i``,
weight negated). The CPD's normaliser ``Z(x_-i)`` cancels in the ratio, so the CPDs need **not**
be normalised: any positive log-linear CPD over conjunctive features (finite weights) works,
decision-tree leaves written as DEFAULT features included. A CPD feature that does not test
``X_i`` is constant in ``X_i`` and cancels; it is skipped.

Averaging (Section 5): the geometric mean of the MNs from several ``(x', o)`` is the average of
their weights. Over a distribution of base instances that factorises over variables (``single``:
a point mass, ``uniform``: ``1/d_j`` per value, ``marginals``: a product of marginals), a
conditioned feature's weight is multiplied by the probability that ``x'`` satisfies the tests it
fixes. Over the ``n`` rotations of an order, a feature of CPD ``i`` whose other variables lie at
cyclic distances ``d_1 < ... < d_k`` after ``i`` keeps the first ``m`` of them (``m = 0..k``) for
a fraction ``(d_{m+1} - d_m) / n`` of the rotations (``d_0 = 0``, ``d_{k+1} = n``); see
:func:`rotation_fractions`. (The paper's Section 5.2 example lists ``5/n`` for the last
subfeature; counting the rotation that starts at ``X_13`` as well gives ``6/n``, and only then
do the four fractions sum to one.)

The output is linear in the DN size for bounded feature length: a feature with ``k`` other
variables gives at most ``2 (k + 1)`` subfeatures per base order. The conversion runs as two numba
passes (count, then fill in parallel) followed by a hash-based merge of duplicate features.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numba as nb
import numpy as np
import numpy.typing as npt

from streammn.dn.network import DependencyNetwork
from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.schema import Rows, Schema
from streammn.errors import DN2MNError
from streammn.network.published import check_weights, refine_on_rows
from streammn.kernel_mode import parallel_pays

if TYPE_CHECKING:
    from streammn.stats import MarginalCounts

BASES = ("marginals", "single", "uniform")
ORDERINGS = ("rotations2", "rotations", "two", "one")
# Below this many DN features the serial conversion is as fast (plants' 53,728: 0.02 s either
# way) and the parallel twin need not be compiled (streammn.kernel_mode.parallel_pays).
PARALLEL_FEATURES = 2**17


# ---------------------------------------------------------------------------------------------
# base-instance distribution and orderings
# ---------------------------------------------------------------------------------------------


def marginals_from_rows(rows: Rows, schema: Schema, smoothing: float = 1.0) -> list[np.ndarray]:
    """Libra's smoothed marginals ``(count(x_i = v) + smoothing/d_i) / (N + smoothing)``."""
    rows = schema.rows_of(rows)
    return smoothed(
        [np.bincount(rows[:, i], minlength=int(d)) for i, d in enumerate(schema.cardinalities)],
        smoothing,
    )


def smoothed(counts, smoothing: float = 1.0) -> list[np.ndarray]:
    """Libra's smoothing ``(count + smoothing/d) / (N + smoothing)`` of per-variable counts."""
    return [(c + smoothing / c.size) / (c.sum() + smoothing) for c in counts]


def base_distribution(schema: Schema, base: str, base_instance=None, marginals=None) -> np.ndarray:
    """The product distribution over base instances as a ``(n_vars, max_card)`` table.

    ``marginals`` may be a list of per-variable vectors (probabilities or counts; each is
    normalised), a ``(n_vars, max_card)`` array, or a stats object with a
    ``probabilities(smoothing=...)`` method such as ``MarginalCounts`` (read with Libra's
    smoothing of 1).
    """
    n, cards = schema.n_vars, schema.cardinalities
    table = np.zeros((n, int(cards.max())))
    if base == "uniform":
        for j, d in enumerate(cards):
            table[j, :d] = 1.0 / d
    elif base == "single":
        if base_instance is None:
            raise DN2MNError("base='single' needs base_instance= (one value per variable)")
        x = np.asarray(base_instance, dtype=np.int64)
        if x.shape != (n,) or (x < 0).any() or (x >= cards).any():
            raise DN2MNError(f"base_instance must hold {n} values within the cardinalities")
        table[np.arange(n), x] = 1.0
    elif base == "marginals":
        if marginals is None:
            raise DN2MNError(
                "base='marginals' needs marginals= (e.g. marginals_from_rows("
                "train_rows, schema), a MarginalCounts), train= rows, or a DN "
                "with its trees (as DTSL gives)"
            )
        if hasattr(marginals, "probabilities"):
            marginals = marginals.probabilities(smoothing=1.0)
        if isinstance(marginals, np.ndarray) and marginals.ndim == 2:
            marginals = [marginals[j, :d] for j, d in enumerate(cards)]
        if len(marginals) != n:
            raise DN2MNError(f"marginals must have one entry per variable ({n})")
        for j, d in enumerate(cards):
            m = np.asarray(marginals[j], dtype=np.float64)
            if m.shape != (d,) or (m < 0).any() or m.sum() <= 0:
                raise DN2MNError(f"marginals[{j}] must be {d} non-negative numbers, not all 0")
            table[j, :d] = m / m.sum()
    else:
        raise DN2MNError(f"base must be one of {BASES}, got {base!r}")
    return table


def ordering_specs(n: int, orderings: str, order=None):
    """``(positions[s, j], rotate[s], weight[s])`` for the order specs averaged over.

    ``order`` is the base order (a permutation of ``0..n-1``, default the identity); ``two`` and
    ``rotations2`` add its reverse. A ``rotate`` spec stands for all ``n`` rotations.
    """
    base = np.arange(n) if order is None else np.asarray(order, dtype=np.int64)
    if sorted(base.tolist()) != list(range(n)):
        raise DN2MNError(f"order must be a permutation of 0..{n - 1}")
    if orderings not in ORDERINGS:
        raise DN2MNError(f"orderings must be one of {ORDERINGS}, got {orderings!r}")
    orders = [base] if orderings in ("one", "rotations") else [base, base[::-1]]
    positions = np.empty((len(orders), n), dtype=np.int64)
    for s, o in enumerate(orders):
        positions[s, o] = np.arange(n)
    rotate = np.full(len(orders), orderings.startswith("rotations"))
    return positions, rotate, np.full(len(orders), 1.0 / len(orders))


def rotation_fractions(n: int, distances) -> np.ndarray:
    """Fraction of the ``n`` rotations in which exactly the ``m`` nearest variables stay free.

    ``distances`` are the cyclic distances ``(pos_j - pos_i) mod n`` of a feature's other
    variables after its target ``i``. Entry ``m`` (``m = 0..k``) is ``(d_{m+1} - d_m) / n`` with
    sorted ``d``, ``d_0 = 0`` and ``d_{k+1} = n``.
    """
    d = np.concatenate([[0], np.sort(np.asarray(distances, dtype=np.int64)), [n]])
    return np.diff(d) / n


# ---------------------------------------------------------------------------------------------
# the conversion kernel
# ---------------------------------------------------------------------------------------------


@nb.njit(cache=True)
def _copy_groups(cc, ng, keep, also, gs, ge, var, val, eq, o_var, o_val, o_eq):
    """Write the conditions of the kept groups (and of group ``also``, -1 for none) from output
    position ``cc`` on; returns the position after them."""
    for g in range(ng):
        if keep[g] or g == also:
            for c2 in range(gs[g], ge[g]):
                o_var[cc] = var[c2]
                o_val[cc] = val[c2]
                o_eq[cc] = eq[c2]
                cc += 1
    return cc


@nb.njit(cache=True)
def _convert_one(f, target, inputs, write, fo, co, outputs, scratch):
    """Conditioned subfeatures of input feature ``f`` (CPD ``target``).

    Returns ``(n_features, n_conditions)`` produced; with ``write`` they are stored at feature
    offset ``fo`` and condition offset ``co`` of the output arrays.

    The arrays come as three tuples, so that the counting and the writing pass of the
    conversion kernel name them once each: ``inputs`` = ``(weights, ptr, var, val, eq, base,
    positions, rotate, spec_w, n)``, ``outputs`` = ``(o_w, o_ptr, o_var, o_val, o_eq)`` (empty
    ones when not ``write``), ``scratch`` = :func:`_scratch`'s arrays.
    """
    weights, ptr, var, val, eq, base, positions, rotate, spec_w, n = inputs
    o_w, o_ptr, o_var, o_val, o_eq = outputs
    gvar, gs, ge, gp, dist, order, keep = scratch
    # group the conditions by variable; gp[g] = P(x'_j satisfies the group's tests)
    ng = 0
    ti = -1
    c = ptr[f]
    while c < ptr[f + 1]:
        j = var[c]
        gs[ng] = c
        while c < ptr[f + 1] and var[c] == j:
            c += 1
        ge[ng] = c
        gvar[ng] = j
        p = 0.0
        for a in range(base.shape[1]):
            if base[j, a] == 0.0:
                continue
            ok = True
            for cc in range(gs[ng], ge[ng]):
                if (a == val[cc]) != eq[cc]:
                    ok = False
                    break
            if ok:
                p += base[j, a]
        gp[ng] = p
        if j == target:
            ti = ng
        ng += 1
    if ti < 0:
        return 0, 0  # no test on the target: constant in X_i, cancels in the ratio
    n_f = 0
    n_c = 0
    len_t = ge[ti] - gs[ti]
    for s in range(positions.shape[0]):
        pos = positions[s]
        pi = pos[target]
        # other groups sorted by cyclic distance after the target (insertion sort, k is small)
        k = 0
        for g in range(ng):
            if g == ti:
                continue
            d = (pos[gvar[g]] - pi) % n
            m = k
            while m > 0 and dist[m - 1] > d:
                dist[m] = dist[m - 1]
                order[m] = order[m - 1]
                m -= 1
            dist[m] = d
            order[m] = g
            k += 1
        if rotate[s]:
            m_lo, m_hi = 0, k
        else:
            # one fixed order: the groups after the target in the order stay free
            m_lo = 0
            while m_lo < k and dist[m_lo] <= (n - 1 - pi):
                m_lo += 1
            m_hi = m_lo
        for m in range(m_lo, m_hi + 1):
            if rotate[s]:
                lo = dist[m - 1] if m > 0 else 0
                hi = dist[m] if m < k else n
                frac = (hi - lo) / n
            else:
                frac = 1.0
            pf = 1.0
            for q in range(m, k):
                pf *= gp[order[q]]
            wt = weights[f] * spec_w[s] * frac * pf
            if wt == 0.0:
                continue
            for g in range(ng):
                keep[g] = False
            len_k = 0
            for q in range(m):
                keep[order[q]] = True
                len_k += ge[order[q]] - gs[order[q]]
            # numerator: kept groups + the target's tests, in variable order
            if write:
                o_w[fo + n_f] = wt
                o_ptr[fo + n_f + 1] = _copy_groups(
                    co + n_c, ng, keep, ti, gs, ge, var, val, eq, o_var, o_val, o_eq
                )
            n_f += 1
            n_c += len_k + len_t
            # denominator: kept groups only, the target fixed to x'_i as well
            wd = -wt * gp[ti]
            if m == 0 or wd == 0.0:
                continue  # a constant feature only shifts log Z
            if write:
                o_w[fo + n_f] = wd
                o_ptr[fo + n_f + 1] = _copy_groups(
                    co + n_c, ng, keep, -1, gs, ge, var, val, eq, o_var, o_val, o_eq
                )
            n_f += 1
            n_c += len_k
    return n_f, n_c


@nb.njit(cache=True)
def _scratch(max_len):
    return (
        np.empty(max_len, np.int64),
        np.empty(max_len, np.int64),
        np.empty(max_len, np.int64),
        np.empty(max_len, np.float64),
        np.empty(max_len, np.int64),
        np.empty(max_len, np.int64),
        np.empty(max_len, np.bool_),
    )


def _block_conversion(loop):
    """The conversion kernel, its loops over blocks of features run by ``loop``: ``nb.prange``
    in numba's thread pool, ``range`` in a process that must not start the pool (a forked
    snapshot writer: numba's OpenMP layer aborts a child that does). One body, two kernels;
    numba caches both, as their closures differ."""

    def convert(targets, weights, ptr, var, val, eq, base, positions, rotate, spec_w, n, max_len):
        F = weights.shape[0]
        n_blocks = min(F, 256)
        nf = np.zeros(F, dtype=np.int64)
        ncond = np.zeros(F, dtype=np.int64)
        empty = (
            np.zeros(0),
            np.zeros(1, dtype=np.int64),
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.uint8),
            np.zeros(0, dtype=np.bool_),
        )
        inputs = (weights, ptr, var, val, eq, base, positions, rotate, spec_w, n)
        for blk in loop(n_blocks):
            scratch = _scratch(max_len)
            for f in range(blk, F, n_blocks):
                nf[f], ncond[f] = _convert_one(f, targets[f], inputs, False, 0, 0, empty, scratch)
        f_off = np.zeros(F + 1, dtype=np.int64)
        c_off = np.zeros(F + 1, dtype=np.int64)
        for f in range(F):
            f_off[f + 1] = f_off[f] + nf[f]
            c_off[f + 1] = c_off[f] + ncond[f]
        o_w = np.empty(f_off[F])
        o_ptr = np.zeros(f_off[F] + 1, dtype=np.int64)
        o_var = np.empty(c_off[F], dtype=np.int32)
        o_val = np.empty(c_off[F], dtype=np.uint8)
        o_eq = np.empty(c_off[F], dtype=np.bool_)
        outputs = (o_w, o_ptr, o_var, o_val, o_eq)
        for blk in loop(n_blocks):
            scratch = _scratch(max_len)
            for f in range(blk, F, n_blocks):
                _convert_one(f, targets[f], inputs, True, f_off[f], c_off[f], outputs, scratch)
        return o_w, o_ptr, o_var, o_val, o_eq

    return convert


_convert = nb.njit(cache=True, parallel=True)(_block_conversion(nb.prange))
_convert_serial = nb.njit(cache=True)(_block_conversion(range))


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------


def dn2mn(
    dn: DependencyNetwork,
    base: str = "marginals",
    orderings: str = "rotations2",
    base_instance: npt.ArrayLike | None = None,
    marginals: npt.ArrayLike | MarginalCounts | None = None,
    order: Sequence[int] | None = None,
    merge: bool = True,
    zero_tol: float = 1e-12,
    refine: int | None = None,
    train: Rows | None = None,
    valid: Rows | None = None,
    refine_stddev: float = 1.0,
    parallel: bool | None = None,
    weights: str | None = None,
) -> MarkovNetwork:
    """Convert a dependency network into a Markov network in closed form (and, given training
    rows, refine its weights as snapshots do: ``weights``).

    Parameters
    ----------
    dn:
        The dependency network; ``dn.cpds[i]`` are log-linear conjunctive features of
        ``P(X_i | x_-i)`` with finite weights (normalisation not required, see module doc).
    base:
        Base-instance distribution: ``'marginals'`` (product of marginals, default; from
        ``marginals``, else Libra-smoothed marginals of ``train``, else of the counts in the
        DN's trees, as in every DN that DTSL learned), ``'uniform'`` (every
        instance, ``prod_j 1/d_j``), ``'single'`` (``base_instance``).
    orderings:
        ``'rotations2'`` (all rotations of ``order`` and of its reverse; default), ``'rotations'``
        (all rotations of ``order``), ``'two'`` (``order`` and its reverse), ``'one'``.
    order:
        The base variable order (default ``0..n-1``).
    merge:
        Merge duplicate features by summing their weights and drop those within ``zero_tol`` of
        zero (default). ``merge=False`` returns every conditioned feature as produced.
    weights:
        ``'refined'`` (the default when ``train`` rows are given): the weights snapshots publish
        (:func:`streammn.network.published.refine_on_rows`), continued by pseudo-likelihood on
        ``train`` and kept only if they score ``valid`` (by default one row of ``train`` in five,
        held out of the fit) better than the closed form; ``'closed-form'`` (the default without
        rows): the paper's conversion as it is.
    refine:
        The number of L-BFGS pseudo-likelihood iterations to continue from the DN2MN weights on
        ``train``, with a Gaussian prior of ``refine_stddev`` centred on those weights. The
        refined model is returned only if its PLL on ``valid`` is higher; otherwise the plain
        conversion. Given, it replaces ``weights``.
    parallel:
        Convert on numba's thread pool (``True``), or serially (``False``: in a process forked
        from one that has used the pool, where it must not be started). Default: serially in a
        background snapshot writer (:func:`streammn.kernel_mode.serial_kernels_only`) and for a
        DN of fewer than ``PARALLEL_FEATURES`` features, on the pool elsewhere.

    Examples
    --------
    >>> from streammn.demo import planted_network
    >>> from streammn.dn.conversion import dn2mn
    >>> from streammn.dtsl import DTSL
    >>> from streammn.inference import sample
    >>> planted, _ = planted_network(8, seed=0)
    >>> rows = sample(planted, 2000, seed=1)
    >>> learner = DTSL(planted.schema, mode="exact", kappa=0.01, cpd="tree")
    >>> dn = learner.fit(rows).to_dependency_network()
    >>> mn = dn2mn(dn)  # base distribution: the marginals counted in the DN's trees
    >>> mn
    MarkovNetwork(8 variables, 285 features, max_states=1048576)
    >>> round(dn.pll(rows), 3), round(mn.pll(rows), 3)
    (-4.065, -4.058)
    >>> dn2mn(dn, base="uniform", orderings="one").n_features
    78
    """
    schema = dn.schema
    n = schema.n_vars
    if base == "marginals" and marginals is None:
        if train is not None:
            marginals = marginals_from_rows(np.asarray(train), schema)
        elif dn.marginal_counts() is not None:
            marginals = smoothed(dn.marginal_counts())
    table = base_distribution(schema, base, base_instance, marginals)
    positions, rotate, spec_w = ordering_specs(n, orderings, order)
    all_feats = FeatureSet.concat(schema, dn.cpds)
    targets = np.repeat(np.arange(n, dtype=np.int64), [c.n_features for c in dn.cpds])
    if not np.isfinite(all_feats.weights).all():
        raise DN2MNError("DN2MN needs positive conditionals: every CPD weight must be finite")
    max_len = int(all_feats.lengths().max()) if all_feats.n_features else 1
    if parallel is None:
        parallel = parallel_pays(all_feats.n_features, PARALLEL_FEATURES)
    convert = _convert if parallel else _convert_serial
    out = convert(
        targets,
        all_feats.weights,
        all_feats.ptr,
        all_feats.var,
        all_feats.val,
        all_feats.eq,
        table,
        positions,
        rotate,
        spec_w,
        n,
        max(max_len, 1),
    )
    # conditions copied from the DN's (out: the kernel's five feature arrays)
    features = FeatureSet(schema, *out, validate=False)  # type: ignore[misc]
    if merge:
        features = features.merge_duplicates(drop_zero=True, tol=zero_tol)
    model = MarkovNetwork(schema, features)
    if refine:
        return refine_weights(model, refine, train, valid, refine_stddev)
    if weights is None:
        weights = "closed-form" if train is None else "refined"
    if check_weights(weights) == "refined":
        if train is None:
            raise DN2MNError("weights='refined' needs train= rows to learn the weights on")
        # (refine_on_rows reads any Rows: it takes them through Schema.rows_of)
        return refine_on_rows(model, train, valid).model  # type: ignore[arg-type]
    return model


def refine_weights(
    model: MarkovNetwork, iterations: int, train, valid, stddev: float = 1.0
) -> MarkovNetwork:
    """A few PLL steps from the model's weights, kept only if validation PLL improves."""
    from streammn.network.weights import fit_weights

    if train is None or valid is None:
        raise DN2MNError("refine= needs train= rows to learn on and valid= rows to check on")
    # the Gaussian prior is centred on the converted weights: refining means staying near them
    refined = fit_weights(
        model, train, stddev=stddev, max_iter=int(iterations), prior_mean=model.weights
    )
    return refined if refined.pll(valid) > model.pll(valid) else model
