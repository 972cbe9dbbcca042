"""Pseudo-likelihood and its gradient for weight learning: reach lists.

Across the evaluations of one fit the rows and the features' conditions stay fixed; only the
weights change. Feature f reaches the conditional of variable j on row r when f holds on r
(it then reaches every variable it tests, at the values its group on that variable allows, x_j
among them), or when f fails on r through its conditions on j alone (it then reaches j's
conditional at the values its group on j allows, x_j not among them). The bitset scan of
:mod:`streammn.network.bitscan` finds both, 64 rows at a time, and lists them per row and value
column ``offs[j] + a``: the *entries* of (row, column) are the features (int32) whose weights
its logit sums.

An evaluation then reads the entries row by row and does everything for the row while they
and its logits are in cache: each logit as one sum of gathered weights, the conditionals and
the row's PLL, and the gradient, which scatters ``P(a | x_-j) - [a = x_j]`` of each column to
its features (summed over a group's values, that is ``P(allowed | x_-j) - [x_j allowed]``).
Column by column, the sums stay in registers and a feature appears at most once per column.
Equal rows are listed once, with their count as a weight. Chunks of rows are spread over
``PARTIAL_SUMS`` fixed sequences (chunk k in sequence k mod PARTIAL_SUMS), each summing its
own value and gradient; the sequences are then added in order, so results do not depend on
the thread count.

Memory: 4 bytes per entry plus 8 per (row, column), kept when they all fit in ``LIST_BYTES``.
Plants (69 binary variables, 8,258 distinct training rows): the 13,189 DN leaf features of
LW make about 1,200 entries per row (49 MB, kept); DN2MN's 178,651 features about 70,000
(2.3 GB). Past the budget an evaluation works chunk by chunk on a slot-major table of the
chunk's logits instead, from the chunk's *word list* (:func:`chunk_logits`: per reaching
feature, its rows word by word, 12 bytes an entry; 64 rows to an entry rather than one):
adding the weights gives the logits, and after they become ``count * (P - [own value])`` the
gradient is gathered from the same list. The word lists of the first chunks of each sequence
are kept across evaluations while they fit in the budget (made by the first evaluation);
the other chunks' are made by a scan each time, in a buffer per sequence. Plants' DN2MN
model: 43.6M entries (520 MB), 13 of its 33 chunks kept, and one evaluation at one thread
from 1.6 CPU s (two scans per chunk) to about 0.95. Kept or scanned, a chunk gives the same
bits; entries and word lists add in different orders, so those two ways agree to rounding.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.network.bitscan import (
    CHUNK_WORDS,
    PARTIAL_SUMS,
    add_words,
    chunk_logits,
    gather_words,
    groups_for,
    lowest_bit,
    new_words,
    value_offsets,
)
from streammn.features import FeatureSet
from streammn.kernel_mode import parallel_pays
from streammn.network.loglinear import (
    MASK_VALUES,
    all_conditionals,
    binary_conditional,
    checked_rows,
    feature_owners,
    gradient_rows,
    normalise_variable,
    row_kernel_features,
)
from streammn.errors import WeightLearningError


LIST_BYTES = 2**28  # entries or word lists kept across evaluations, at most (256 MiB)
ENTRY_BYTES = 4  # an entry: an int32 feature
# Below this many distinct rows x features the serial scans and evaluations run as fast on two
# cores (a 16-variable demo: 2.4 s either way end to end; nltcs's 2,671 x 6,882 evaluates in
# 10 ms parallel, 16 ms serial; plants' 8,258 x 53,728 in 83 ms against 166 ms), and the
# parallel twins need not be compiled (streammn.kernel_mode.parallel_pays).
PARALLEL_WORK = 2**24
ENTRY_WORD_BYTES = 12  # a word-list entry (uint64 rows, int32 position) or listed feature


@nb.njit(cache=True)
def _scan_reach(rows, start, offs, cards, groups, fill, at, feat):
    """Scan one chunk of ``64 * CHUNK_WORDS`` rows (from ``start``) against every feature, by
    its word list (:func:`chunk_logits`), entry after entry.

    ``at[(r - start) * n_slots + s]`` is row r's column s. ``fill`` false: count, adding the
    number of entries there. ``fill`` true: ``at`` holds the write positions in ``feat`` and
    advances as the entries are written (in feature order).
    """
    n_slots = offs[-1]
    chunk = 64 * CHUNK_WORDS
    none = np.zeros(0)
    words, nf = chunk_logits(
        rows, start, offs, cards, groups, none, none, new_words(groups[0].shape[0] - 1), True
    )
    feats, ends, xs, pos = words
    e = 0
    for i in range(nf):
        while e < ends[i]:
            _reach_column(xs[e], pos[e] % chunk, n_slots, pos[e] // chunk, feats[i], fill, at, feat)
            e += 1


@nb.njit(cache=True)
def _reach_column(x, base, n_slots, column, f, fill, at, feat):
    """Count or write feature f as an entry of ``column`` for the rows ``base + b``, b the set
    bits of ``x`` (see :func:`_scan_reach`)."""
    while x != 0:
        i = (base + lowest_bit(x)) * n_slots + column
        if fill:
            feat[at[i]] = f
        at[i] += 1
        x &= x - np.uint64(1)


def _reach_scans(loop):
    """The two scans that list the entries (count, then fill), their loops over chunks of rows
    run by ``loop``: ``nb.prange`` in numba's thread pool, ``range`` in a forked snapshot writer,
    which must not start the pool (:mod:`streammn.stream.publishing`). One body, two kernels
    each."""

    def count_reach(rows, offs, cards, groups):
        """``ptr``: the entries of row r, column s will be ``ptr[r * n_slots + s]`` to the next."""
        n = rows.shape[0]
        n_slots = offs[-1]
        chunk = 64 * CHUNK_WORDS
        ptr = np.zeros(n * n_slots + 1, dtype=np.int64)
        none = np.zeros(0, dtype=np.int32)
        for k in loop((n + chunk - 1) // chunk):
            s = k * chunk * n_slots
            e = min(k * chunk + chunk, n) * n_slots
            _scan_reach(rows, k * chunk, offs, cards, groups, False, ptr[s + 1 : e + 1], none)
        for i in range(n * n_slots):
            ptr[i + 1] += ptr[i]
        return ptr

    def fill_reach(rows, offs, cards, groups, ptr):
        """The entries of every row, chunk by chunk of rows."""
        n = rows.shape[0]
        n_slots = offs[-1]
        chunk = 64 * CHUNK_WORDS
        feat = np.empty(ptr[-1], dtype=np.int32)
        for k in loop((n + chunk - 1) // chunk):
            at = ptr[k * chunk * n_slots : min(k * chunk + chunk, n) * n_slots].copy()
            _scan_reach(rows, k * chunk, offs, cards, groups, True, at, feat)
        return feat

    return count_reach, fill_reach


_count_reach, _fill_reach = (nb.njit(cache=True, parallel=True)(f) for f in _reach_scans(nb.prange))
_count_reach_serial, _fill_reach_serial = (nb.njit(cache=True)(f) for f in _reach_scans(range))


@nb.njit(cache=True)
def _row_conditionals(probs, row, offs, cards):
    """Turn a row's logits into its conditionals in place; return ``sum_j log P(x_j | x_-j)``.

    Binary variables take one exponential each, and their probabilities are multiplied
    together and logged once the product falls below 1e-150 (a factor below 1e-150 is added as
    its own log instead, so the product never leaves the normal range): about one logarithm a
    row rather than one a variable.
    """
    total = 0.0
    product = 1.0
    for j in range(cards.shape[0]):
        if cards[j] != 2:
            total += normalise_variable(probs, offs[j], cards[j], row[j])
            continue
        z, e = binary_conditional(probs, offs[j], row[j])
        p = probs[offs[j] + row[j]]
        if p < 1e-150:
            total += -max(z, 0.0) - np.log1p(e)
            continue
        product *= p
        if product < 1e-150:
            total += np.log(product)
            product = 1.0
    return total + np.log(product)


@nb.njit(cache=True)
def _chunk_pll(rows, counts, start, stop, offs, cards, weights, ptr, feat, probs, grad):
    """Summed PLL of rows ``start:stop`` (each weighted by its count) from their entries,
    adding their gradient to ``grad``; ``probs`` is scratch."""
    n_slots = offs[-1]
    value = 0.0
    for r in range(start, stop):
        base = r * n_slots
        for s in range(n_slots):
            total = 0.0
            for i in range(ptr[base + s], ptr[base + s + 1]):
                total += weights[feat[i]]
            probs[s] = total
        value += counts[r] * _row_conditionals(probs, rows[r], offs, cards)
        for j in range(cards.shape[0]):  # probs becomes P(a | x_-j) - [a = x_j]
            probs[offs[j] + rows[r, j]] -= 1.0
        for s in range(n_slots):
            d = counts[r] * probs[s]
            for i in range(ptr[base + s], ptr[base + s + 1]):
                grad[feat[i]] -= d
    return value


@nb.njit(cache=True)
def _table_pll(rows, counts, start, offs, cards, table, probs):
    """Summed PLL of a chunk's rows from their logits in the slot-major ``table``, which then
    holds ``count * (P(a | x_-j) - [a = x_j])`` per row for the gradient; ``probs`` is
    scratch."""
    value = 0.0
    for r in range(min(table.shape[1], rows.shape[0] - start)):
        for s in range(offs[-1]):
            probs[s] = table[s, r]
        value += counts[start + r] * _row_conditionals(probs, rows[start + r], offs, cards)
        for j in range(cards.shape[0]):
            probs[offs[j] + rows[start + r, j]] -= 1.0
        for s in range(offs[-1]):
            table[s, r] = counts[start + r] * probs[s]
    return value


@nb.njit(cache=True)
def _chunk_scan_pll(
    rows, counts, start, offs, cards, weights, groups, table, probs, grad, words, kept, b, i
):
    """:func:`_chunk_pll` without entries, for chunk ``i`` of sequence ``b``: from its word
    list when ``kept`` holds it, else from a scan (:func:`chunk_logits`, into the ``words``
    buffers), whose list ``kept`` then keeps if it is filling and the list fits. Returns
    ``(value, words)``."""
    k_feats, k_ends, k_xs, k_at, k_bounds, k_state = kept
    listed = (k_feats[b], k_ends[b], k_xs[b], k_at[b])
    f0, e0 = (0, 0) if i == 0 else (k_bounds[b, i - 1, 0], k_bounds[b, i - 1, 1])
    table[:] = 0.0
    flat = table.reshape(-1)
    if i < k_state[b, 0]:
        add_words(listed, f0, k_bounds[b, i, 0], e0, weights, flat)
        value = _table_pll(rows, counts, start, offs, cards, table, probs)
        gather_words(listed, f0, k_bounds[b, i, 0], e0, flat, grad)
        return value, words
    words, nf = chunk_logits(rows, start, offs, cards, groups, weights, flat, words, True)
    value = _table_pll(rows, counts, start, offs, cards, table, probs)
    gather_words(words, 0, nf, 0, flat, grad)
    if k_state[b, 1] == 0:  # still filling: keep this chunk's list if it fits
        ne = words[1][nf - 1] if nf else 0
        if ENTRY_WORD_BYTES * (f0 + nf + e0 + ne) > k_state[b, 2]:
            k_state[b, 1] = 1
        else:
            listed[0][f0 : f0 + nf] = words[0][:nf]
            listed[1][f0 : f0 + nf] = words[1][:nf] + e0
            listed[2][e0 : e0 + ne] = words[2][:ne]
            listed[3][e0 : e0 + ne] = words[3][:ne]
            k_bounds[b, i, 0] = f0 + nf
            k_bounds[b, i, 1] = e0 + ne
            k_state[b, 0] += 1
    return value, words


def _evaluation(loop):
    """The evaluation kernel, its ``PARTIAL_SUMS`` sequences run by ``loop`` (see
    :func:`_reach_scans`); the sums add in the same order either way, so both give the same
    bits."""

    def pll_and_gradient(rows, counts, offs, cards, weights, groups, ptr, feat, kept):
        """Summed PLL and gradient from the entries, or by the word lists of the chunks of rows
        when there are no entries (``ptr`` empty): kept ones, or made by a scan."""
        n = rows.shape[0]
        chunk = 64 * CHUNK_WORDS
        n_chunks = (n + chunk - 1) // chunk
        values = np.zeros(PARTIAL_SUMS)
        grads = np.zeros((PARTIAL_SUMS, weights.shape[0]))
        for b in loop(PARTIAL_SUMS):
            probs = np.empty(offs[-1])
            table = np.empty((offs[-1], chunk))
            words = new_words(weights.shape[0] if ptr.shape[0] == 0 else 0)
            for k in range(b, n_chunks, PARTIAL_SUMS):
                s = k * chunk
                if ptr.shape[0] == 0:  # chunk k is sequence b's (k // PARTIAL_SUMS)-th
                    value, words = _chunk_scan_pll(
                        rows,
                        counts,
                        s,
                        offs,
                        cards,
                        weights,
                        groups,
                        table,
                        probs,
                        grads[b],
                        words,
                        kept,
                        b,
                        k // PARTIAL_SUMS,
                    )
                    values[b] += value
                else:
                    values[b] += _chunk_pll(
                        rows,
                        counts,
                        s,
                        min(s + chunk, n),
                        offs,
                        cards,
                        weights,
                        ptr,
                        feat,
                        probs,
                        grads[b],
                    )
        grad = np.zeros(weights.shape[0])
        value = 0.0
        for b in range(PARTIAL_SUMS):
            value += values[b]
            grad += grads[b]
        return value, grad

    return pll_and_gradient


_pll_and_gradient = nb.njit(cache=True, parallel=True)(_evaluation(nb.prange))
_pll_and_gradient_serial = nb.njit(cache=True)(_evaluation(range))


def _kept_words(n_rows: int, budget: int):
    """Empty storage for the word lists that :func:`_pll_and_gradient` keeps across
    evaluations, ``budget`` bytes shared equally by the ``PARTIAL_SUMS`` sequences of chunks
    (each keeps the lists of its first chunks, while they fit): ``(feats, ends, xs, at,
    bounds, state)``; ``bounds[b, i]`` are the ends of chunk i's listed features and entries
    in sequence b's arrays, ``state[b]`` its (kept chunks, full, byte share). Capacities are
    counted in items; memory is only used as lists are written."""
    share = budget // PARTIAL_SUMS
    cap = share // ENTRY_WORD_BYTES
    per_sequence = -(-n_rows // (64 * CHUNK_WORDS)) // PARTIAL_SUMS + 1
    state = np.zeros((PARTIAL_SUMS, 3), dtype=np.int64)
    state[:, 2] = share
    return (
        np.empty((PARTIAL_SUMS, cap), dtype=np.int32),
        np.empty((PARTIAL_SUMS, cap), dtype=np.int64),
        np.empty((PARTIAL_SUMS, cap), dtype=np.uint64),
        np.empty((PARTIAL_SUMS, cap), dtype=np.int32),
        np.zeros((PARTIAL_SUMS, per_sequence, 2), dtype=np.int64),
        state,
    )


def distinct_rows_counted(rows: np.ndarray, counts=None) -> tuple[np.ndarray, np.ndarray]:
    """``(patterns, counts)``: the distinct rows in lexicographic order and how often each
    occurs, or their summed ``counts`` when the rows come with counts (sorted rows put rows
    that share values in the same words of the bitset scan)."""
    keys = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    summed = np.bincount(inverse.ravel(), weights=counts, minlength=first.shape[0])
    return np.ascontiguousarray(rows[first]), summed.astype(np.float64)


class ReachLists:
    """Where the features of ``fs`` reach the conditionals of each distinct row of a fixed block
    of rows (see the module notes); :meth:`pll_and_gradient` evaluates the summed PLL and its
    gradient for any weights.

    The entries are counted (one bitset scan) and written (a second) when they take at most
    ``list_bytes`` (default ``LIST_BYTES``); otherwise every evaluation works from the
    chunks' word lists instead (``n_entries`` is then 0), kept within that budget. Needs
    variables of at most ``MASK_VALUES`` values. ``counts`` weights the rows (default: one
    each), as if each row were repeated that many times. ``parallel`` runs the scans and
    evaluations on numba's thread pool (``True``) or serially (``False``); by default serially
    in a forked snapshot writer (:func:`streammn.kernel_mode.serial_kernels_only`) and for
    fewer than ``PARALLEL_WORK`` distinct rows x features, on the pool elsewhere. Both give the
    same bits.
    """

    def __init__(
        self,
        fs: FeatureSet,
        rows: np.ndarray,
        owner=None,
        list_bytes: int | None = None,
        counts=None,
        parallel: bool | None = None,
    ):
        rows = checked_rows(rows, fs)
        counts = _counts(counts, rows)
        self.cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
        if self.cards.max() > MASK_VALUES:
            raise WeightLearningError(f"reach lists need variables of at most {MASK_VALUES} values")
        self.rows, self.counts = distinct_rows_counted(rows, counts)
        if parallel is None:
            parallel = parallel_pays(len(self.rows) * fs.n_features, PARALLEL_WORK)
        count_reach, fill_reach, self._evaluate = (
            (_count_reach, _fill_reach, _pll_and_gradient)
            if parallel
            else (_count_reach_serial, _fill_reach_serial, _pll_and_gradient_serial)
        )
        self.offs = value_offsets(self.cards)
        self.groups = groups_for(fs, self.rows, self.cards, feature_owners(fs, owner))
        budget = LIST_BYTES if list_bytes is None else list_bytes
        chunk = 64 * CHUNK_WORDS
        self.ptr = np.zeros(0, dtype=np.int64)
        self.feat = np.zeros(0, dtype=np.int32)
        self.kept = _kept_words(0, 0)
        pointer_bytes = 8 * len(self.rows) * int(self.offs[-1])
        if budget > pointer_bytes:
            first = count_reach(self.rows[:chunk], self.offs, self.cards, self.groups)[-1]
            if ENTRY_BYTES * first * (len(self.rows) / chunk) <= 2 * budget:  # a look first
                ptr = count_reach(self.rows, self.offs, self.cards, self.groups)
                if ENTRY_BYTES * ptr[-1] + pointer_bytes <= budget:
                    self.ptr = ptr
                    self.feat = fill_reach(self.rows, self.offs, self.cards, self.groups, ptr)
                    return
        self.kept = _kept_words(len(self.rows), budget)

    @property
    def n_entries(self) -> int:
        """Entries kept over the distinct rows (0 when every evaluation rescans)."""
        return int(self.ptr[-1]) if len(self.ptr) else 0

    @property
    def kept_chunks(self) -> int:
        """Chunks of rows whose word lists are kept (made by the first evaluation)."""
        return int(self.kept[5][:, 0].sum())

    def pll_and_gradient(self, weights: np.ndarray) -> tuple[float, np.ndarray]:
        """Summed PLL of the rows (with repeats) and its gradient at ``weights``."""
        weights = np.ascontiguousarray(weights, dtype=np.float64)
        return self._evaluate(
            self.rows,
            self.counts,
            self.offs,
            self.cards,
            weights,
            self.groups,
            self.ptr,
            self.feat,
            self.kept,
        )


def pll_evaluator(
    fs: FeatureSet,
    rows: np.ndarray,
    owner=None,
    list_bytes: int | None = None,
    counts=None,
    parallel: bool | None = None,
):
    """A function ``weights -> (summed PLL, gradient)`` of the features of ``fs`` on ``rows``
    (weighted by ``counts``, default one each): :class:`ReachLists` built once (``list_bytes``
    and ``parallel`` as there), or row by row when a variable has more than 64 values."""
    rows = checked_rows(rows, fs)
    if fs.schema.cardinalities.max() <= MASK_VALUES:
        return ReachLists(fs, rows, owner, list_bytes, counts, parallel).pll_and_gradient
    if counts is not None:
        counts = _counts(counts, rows)
    return lambda weights: _rowwise_pll_and_gradient(fs.with_weights(weights), rows, owner, counts)


def _counts(counts, rows: np.ndarray) -> np.ndarray:
    """Row weights: ``counts`` as floats, one per row, or ones."""
    if counts is None:
        return np.ones(rows.shape[0])
    counts = np.ascontiguousarray(counts, dtype=np.float64)
    if counts.shape != (rows.shape[0],):
        raise WeightLearningError(
            f"expected one count per row ({rows.shape[0]}), got {counts.shape}"
        )
    return counts


def pll_and_gradient(fs: FeatureSet, rows: np.ndarray, owner=None) -> tuple[float, np.ndarray]:
    """Summed (not mean) PLL of ``rows`` and its gradient with respect to ``fs.weights``: one
    evaluation, so by the two bitset passes, without writing entries for later ones."""
    return pll_evaluator(fs, rows, owner, list_bytes=0)(fs.weights)


def _rowwise_pll_and_gradient(
    fs: FeatureSet, rows: np.ndarray, owner, counts
) -> tuple[float, np.ndarray]:
    """:func:`pll_and_gradient` row by row (weighted by ``counts`` unless None), for variables
    with more than 64 values."""
    probs, terms = all_conditionals(fs, rows, owner)
    cards = np.ascontiguousarray(fs.schema.cardinalities, dtype=np.int64)
    row_weights = _counts(counts, rows)
    grad = gradient_rows(
        rows,
        row_weights,
        probs,
        cards,
        value_offsets(cards),
        *row_kernel_features(fs, owner),
        PARTIAL_SUMS,
    )
    return float(terms.sum() if counts is None else terms.sum(axis=1) @ counts), grad
