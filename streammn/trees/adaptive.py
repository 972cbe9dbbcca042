"""Drift detection and adaptation for one-pass DTSL: per-tree change detectors and alternate trees.

What is monitored. For every tree ``t`` and scored row, the prequential conditional log-loss
``-log P(x_t | leaf)`` of the tree's target at the row's leaf, with the leaf's counts as they
were when a scored row first reached it in the current epoch of ``SNAPSHOT_PERIODS`` monitoring
periods (or at the leaf's creation when it is newer), so a row never scores a model that has
learned it. The scored rows are the first eighth of every monitoring period (125 of 1,000 rows).
Costs decided these choices: routing every row through every tree a second time cost as much as
learning it (+50% time at 50 variables); a quarter of the rows with every touched leaf's
log-probabilities recomputed every period still cost 25% at 60 variables, and 22-27% with
estimates refreshed every 5,000 rows once the trees were 10M rows deep (their leaves no longer
fit in cache); an eighth halves that (``benchmarks/results/drift.md``). A contiguous scored
block keeps the first-touch rule exact whatever the batch cuts (a row of the block learned
before a later one reached that leaf first), and on exchangeable rows 125 rows a period carry
what any 125 do; a leaf estimate at most 5,000 rows old is a fine yardstick for a loss that
moves when the stream changes. A numba kernel computes the losses for a whole piece of rows per
tree, clips them at ``ln(d) + 3`` nats (a leaf that gives the seen value less than ``e**-3 / d``
is as wrong as it matters: unclipped, a near-deterministic leaf's rare misses make the
per-period means so skewed that no Gaussian threshold controls false alarms), and adds it in
fixed point (``2**-16`` nats) to per-tree integer sums, so the sums do not depend on how the
stream was cut into batches and a resumed run is byte-identical.

Detector. Every monitoring period (``MONITOR_ROWS`` rows rounded to a multiple of the grace
period: one numpy update per period for all trees keeps the detector's cost per row small) each
tree's mean loss over the period, ``x``, goes into a one-sided CUSUM (Page's test; Page-Hinkley
with a fading reference), vectorised over trees::

    z = (x - mu) / sqrt(v / g)        G = max(0, G + z - K)        alarm when G > H

with ``mu`` and ``v`` the tree's reference mean loss and per-row loss variance (running means
over the first ``WARMUP`` periods, then exponentially weighted over ``HORIZON`` periods) and
``g`` the rows of a period. Why not river's ``ADWIN`` (the issue's first suggestion): (1) it is
two-sided, and the loss of a tree that is still learning falls for a long time, which ADWIN
reports as change; only a *rise* of the loss is drift a tree must be protected from (a drop is
the tree doing its job, and the counts keep following the stream); (2) its state is a Python
object per tree, which the learner state (arrays and JSON, no pickles) cannot hold, so resume
would not be byte-identical; (3) its guarantee is stated for values in [0, 1] at a per-check
delta, while the target here is at most one false alarm per 10M rows over *all* trees. The
CUSUM is O(1) state per tree (a few arrays), one numpy expression per period for all trees,
and its false-alarm rate is set by ``H``: with ``K = 0.5`` (detect rises of at least one
standard error of a period mean) Siegmund's approximation gives an in-control run length of
about ``2 exp(H + 1.166)`` periods per tree, ``3e9`` periods at ``H = 20``, so a stream of 10M
rows (1e4 periods of 1,000 rows) over 100 trees expects about ``3e-4`` false alarms; the margin
pays for the non-Gaussian period means and the estimated reference. A rise of ``s`` standard
errors is found after about ``(H + 1.2) / (s - K)`` periods: an abrupt switch of the
generating model raises most trees' loss by tens of standard errors, found at the end of the
period it happens in. The change point is estimated as the last period at which ``G`` was 0.

Adaptation (the Hoeffding Adaptive Tree scheme, per tree rather than per node since the
detector watches the whole tree). The first alarm starts an *episode*: a second grower (the
*alternate* grower, same settings and its own budget, so up to twice ``memory_mb`` during an
episode) on a fresh forest, grown from the estimated change point on (the latest of the
alarmed trees' estimates): it is first fed the replay buffer's rows since the change point,
then every new row. It grows an alternate for *every* tree, not only the alarmed ones: a
change of the generating model does not raise every affected tree's loss (a target that
becomes more predictable from new parents scores as before under its old tree; on the abrupt
benchmark 8 of 60 changed trees never alarmed and kept the model 2% off for 140k rows), and
the swap test below, not the detector, decides which trees are replaced. Each tree is
compared with its alternate on the scored rows: an exponentially weighted mean of the
per-period loss difference (main minus alternate); once it exceeds ``SWAP_Z`` standard errors
and ``MIN_SWAP_GAIN`` nats per row (``QUIET_SWAP_GAIN`` for a tree that did not alarm: an
alternate grown exactly from the episode's rows can beat a Hoeffding tree of an unchanged
target by a little, which is no reason to throw its statistics away; after at least
``MIN_ALT_PERIODS`` periods) the alternate
tree is swapped into the main forest (the forest is compacted, the leaves keep the
alternate's split statistics) and the tree's detector starts afresh. An alternate that has not
won within ``MAX_ALT_PERIODS`` periods is dropped, so a tree whose target did not change keeps
its tree, counts and statistics, and a false alarm costs an episode's CPU (alternates learn
for at most ``MAX_ALT_PERIODS`` periods), not a tree. A tree that alarms again during the
episode after its alternate ended gets a new one. The episode ends when no alternate is left.

Exact rebuilds (the grower regrows all trees from the replay buffer while it holds the whole
stream): an alarm means the buffer no longer holds one distribution, so the first alarm turns
the main grower's rebuilds off for good; the alternate grower rebuilds from its own buffer,
which holds only rows since the change point, so an alternate that starts within the first
``replay_rows`` rows of its episode is an exact tree on the post-change rows.

Drift events (``alarm``, ``swap``, ``drop`` with the row and tree) are kept in the state; DTSL
reports them for the snapshot manifest and the progress line.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from streammn.trees.forest import Forest

DETECTORS = ("page-hinkley",)
MONITOR_ROWS = 1000  # rows per detector update (rounded to a multiple of grace_period)
SCORED_SHARE = 8  # the first 1/SCORED_SHARE of each period's rows are scored
SNAPSHOT_PERIODS = 5  # leaves are scored with their counts as of the last 5-period epoch
LOSS_SCALE = 2.0**16  # fixed point of the per-row losses (integer sums: order-free)
LOSS_CAP = 3.0  # clip at ln(d) + LOSS_CAP nats
K_ALLOWANCE = 0.5  # CUSUM slack, in standard errors of a period mean
THRESHOLD = 20.0  # CUSUM alarm level H
WARMUP = 10  # periods of plain averaging before a tree's detector may alarm
HORIZON = 200  # periods the reference mean and variance average over
MIN_VAR = 1e-4  # floor of the per-row loss variance (near-deterministic targets)
SWAP_HORIZON = 10  # periods the main-minus-alternate loss difference averages over
SWAP_Z = 3.0  # standard errors by which the alternate must be better ...
MIN_SWAP_GAIN = 0.002  # ... and nats per row (a tree whose target did not change stays)
QUIET_SWAP_GAIN = 0.01  # ... or, for a tree that did not alarm in the episode, this many
MIN_ALT_PERIODS = 5
MAX_ALT_PERIODS = 100
EVENTS = ("alarm", "swap", "drop")


@nb.njit(cache=True, inline="always")
def _descend(row, node, links):
    """One step down from an internal ``node`` (the child ``row`` takes)."""
    return links[node, 2 + (row[links[node, 0]] != links[node, 1])]


@nb.njit(cache=True, inline="always")
def _to_leaf(row, node, links):
    """The leaf ``row`` reaches from ``node`` (itself when a leaf): the finishing descent of
    each of the interleaved rows in :func:`period_losses`, written once; inlined, so the hot
    loop compiles as if it were spelt out."""
    while links[node, 0] >= 0:
        node = _descend(row, node, links)
    return node


@nb.njit(cache=True)
def period_losses(
    rows,
    trees,
    roots,
    links,
    counts,
    cards,
    prior,
    cap,
    scale,
    stamp,
    snap,
    value_stamp,
    table,
    period,
    loss_sum,
    loss_sq,
):
    """Per tree in ``trees``: route ``rows`` and add each one's clipped log-loss ``-log P(x_t
    | leaf)`` (fixed point, ``scale`` units) to ``loss_sum[t]``, its square to ``loss_sq[t]``.

    A leaf's counts are copied to ``snap`` the first time a row reaches it in the epoch
    (``stamp[node] != period``, ``period`` being the epoch's number): no scored row of the
    epoch has been learned at the leaf before that, so the copy does not depend on the batch
    cuts. The loss of a value is computed from
    the copy the first time that value is seen there (``value_stamp``) and kept in ``table``.
    Rows are routed four at a time, so the four chains of loads overlap."""
    n = rows.shape[0]
    leaves = np.empty(n, dtype=np.int64)
    for q in range(trees.shape[0]):
        t = trees[q]
        d = cards[t]
        alpha = prior / d
        root = roots[t]
        r = 0
        while r < n:
            a, b, c, e = root, root, root, root
            ra, rb, rc, re = (
                rows[r],
                rows[min(r + 1, n - 1)],
                rows[min(r + 2, n - 1)],
                rows[min(r + 3, n - 1)],
            )
            while (links[a, 0] & links[b, 0] & links[c, 0] & links[e, 0]) >= 0:
                if links[a, 0] >= 0:
                    a = _descend(ra, a, links)
                if links[b, 0] >= 0:
                    b = _descend(rb, b, links)
                if links[c, 0] >= 0:
                    c = _descend(rc, c, links)
                if links[e, 0] >= 0:
                    e = _descend(re, e, links)
            a = _to_leaf(ra, a, links)
            b = _to_leaf(rb, b, links)
            c = _to_leaf(rc, c, links)
            e = _to_leaf(re, e, links)
            leaves[r] = a
            if r + 1 < n:
                leaves[r + 1] = b
            if r + 2 < n:
                leaves[r + 2] = c
            if r + 3 < n:
                leaves[r + 3] = e
            r += 4
        for r in range(n):
            node = leaves[r]
            y = rows[r, t]
            if stamp[node] != period:
                stamp[node] = period
                for k in range(d):
                    snap[node, k] = counts[node, k]
            if value_stamp[node, y] != period:
                value_stamp[node, y] = period
                total = 0.0
                for k in range(d):
                    total += snap[node, k]
                seen = snap[node, y] + alpha
                loss = cap[t] if seen <= 0.0 else min(np.log((total + prior) / seen), cap[t])
                table[node, y] = np.int64(loss * scale + 0.5)
            fixed = table[node, y]
            loss_sum[t] += fixed
            loss_sq[t] += fixed * fixed


class PeriodLoss:
    """Prequential losses of one forest's trees over the current monitoring period."""

    def __init__(self, forest: Forest):
        n = forest.schema.n_vars
        self.sum = np.zeros(n, dtype=np.int64)
        self.sq = np.zeros(n, dtype=np.int64)
        self.cap = np.log(forest.cards.astype(np.float64)) + LOSS_CAP
        C = forest.max_card
        self.stamp = np.zeros(0, dtype=np.int64)  # period a node's counts were copied
        self.snap = np.zeros((0, C), dtype=np.int64)  # the copies
        self.value_stamp = np.zeros((0, C), dtype=np.int64)
        self.table = np.zeros((0, C), dtype=np.int64)  # fixed-point losses from the copies

    def _reserve(self, size: int) -> None:
        old = self.stamp.shape[0]
        if size <= old:
            return
        size = max(size, 2 * old)
        for name, fill in (("stamp", -1), ("snap", 0), ("value_stamp", -1), ("table", 0)):
            a = getattr(self, name)
            grown = np.full((size,) + a.shape[1:], fill, dtype=np.int64)
            grown[:old] = a
            setattr(self, name, grown)

    def add(self, forest: Forest, rows: np.ndarray, trees: np.ndarray, period: int) -> None:
        self._reserve(forest.n_nodes)
        period_losses(
            rows,
            trees,
            forest.roots,
            forest.links,
            forest.counts,
            forest.cards,
            forest.prior,
            self.cap,
            LOSS_SCALE,
            self.stamp,
            self.snap,
            self.value_stamp,
            self.table,
            period,
            self.sum,
            self.sq,
        )

    def forget_leaves(self) -> None:
        """The forest's nodes were replaced (a rebuild, a swap): no leaf is known."""
        self.stamp[:] = -1
        self.value_stamp[:] = -1

    def reset(self) -> None:
        self.sum[:] = 0
        self.sq[:] = 0

    def get_state(self, prefix: str, period: int) -> dict:
        known = np.flatnonzero(self.stamp == period)
        return {
            f"{prefix}loss_sum": self.sum.copy(),
            f"{prefix}loss_sq": self.sq.copy(),
            f"{prefix}loss_nodes": known,
            f"{prefix}loss_snap": self.snap[known],
        }

    def set_state(self, state: dict, prefix: str, forest: Forest, period: int) -> None:
        """Restore the sums and the copies (the losses are recomputed from them as needed)."""
        self.sum[:] = state[f"{prefix}loss_sum"]
        self.sq[:] = state[f"{prefix}loss_sq"]
        known = np.asarray(state[f"{prefix}loss_nodes"], dtype=np.int64)
        self._reserve(max(forest.n_nodes, int(known.max()) + 1 if known.size else 1))
        self.stamp[known] = period
        self.snap[known] = state[f"{prefix}loss_snap"]


def _ewma_weight(n_obs: np.ndarray, horizon: int) -> np.ndarray:
    """Plain running mean for the first ``horizon`` observations, then exponential weights."""
    return np.maximum(1.0 / np.maximum(n_obs, 1), 1.0 / horizon)


def transplant(main: Forest, donor: Forest, trees: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Replace ``trees`` of ``main`` by ``donor``'s trees of the same targets, in place,
    compacting the node arrays (roots stay nodes ``0..n-1``; kept nodes keep their order, the
    donor's follow). Returns the new id of each old node of ``main`` and of ``donor`` (-1: not
    in the result); the donor's nodes come without statistics slots."""
    n_vars = main.schema.n_vars
    swap = np.zeros(n_vars, dtype=bool)
    swap[trees] = True
    nm, nd = main.n_nodes, donor.n_nodes
    keep_m = ~swap[main.tree[:nm]]
    keep_d = swap[donor.tree[:nd]]
    keep_m[:n_vars] = False  # roots are placed first
    keep_d[:n_vars] = False
    map_m = np.full(nm, -1, dtype=np.int64)
    map_d = np.full(nd, -1, dtype=np.int64)
    roots = np.arange(n_vars)
    map_m[roots[~swap]] = roots[~swap]
    map_d[roots[swap]] = roots[swap]
    k_m = int(keep_m.sum())
    map_m[keep_m] = n_vars + np.arange(k_m)
    map_d[keep_d] = n_vars + k_m + np.arange(int(keep_d.sum()))
    total = n_vars + k_m + int(keep_d.sum())
    out = Forest(main.schema, prior=main.prior, capacity=max(total, 1024))
    for src, mapping in ((main, map_m), (donor, map_d)):
        old = np.flatnonzero(mapping >= 0)
        new = mapping[old]
        links = src.links[old].copy()
        internal = links[:, 0] >= 0
        links[internal, 2] = mapping[links[internal, 2]]
        links[internal, 3] = mapping[links[internal, 3]]
        out.links[new] = links
        parent = src.parent[old]
        out.parent[new] = np.where(parent >= 0, mapping[np.maximum(parent, 0)], -1)
        out.depth[new] = src.depth[old]
        out.tree[new] = src.tree[old]
        out.counts[new] = src.counts[old]
        out.slot[new] = src.slot[old] if src is main else -1
    out.n_nodes = total
    main.replace_with(out)
    return map_m, map_d


def _learn(grower, rows: np.ndarray, loss: PeriodLoss) -> None:
    """``grower.learn(rows)``; a rebuild during it replaces the leaves ``loss`` knows."""
    rebuilds = grower.rebuild_count
    grower.learn(rows)
    if grower.rebuild_count != rebuilds:
        loss.forget_leaves()


def _replace_trees(grower, donor: Forest, trees: np.ndarray) -> np.ndarray:
    """Put ``donor``'s ``trees`` into ``grower``'s forest (:func:`transplant`): the replaced
    leaves' statistics slots are freed, the others follow their nodes (the buffered rows'
    value bitmaps do not depend on the trees). Returns the donor's node ids in the grower's
    forest."""
    f, st = grower.forest, grower.stats
    leaves = f.leaves()
    st.release(f.slot[leaves[np.isin(f.tree[leaves], trees) & (f.slot[leaves] >= 0)]])
    map_main, map_donor = transplant(f, donor, trees)
    active = st.slot_node >= 0
    st.slot_node[active] = map_main[st.slot_node[active]]
    return map_donor


class DriftAdapter:
    """Wraps the main :class:`~streammn.trees.hoeffding.HoeffdingGrower` of a DTSL: scores
    every row per tree, runs the detectors, grows and swaps alternate trees (module docstring).

    ``make_grower(forest, state)`` builds a grower with the learner's settings (the alternate
    grower is one); ``state`` (from :meth:`get_state`) resumes an adapter exactly."""

    def __init__(self, grower, make_grower, state: dict | None = None):
        self.grower = grower
        self.make_grower = make_grower
        f = grower.forest
        n = f.schema.n_vars
        self.g = grower.settings.grace_period
        self.period = self.g * max(1, round(MONITOR_ROWS / self.g))
        self.scored = max(1, self.period // SCORED_SHARE)  # rows scored at each period's start
        self.all_trees = np.arange(n, dtype=np.int64)
        self.loss = PeriodLoss(f)
        self.alt_loss = PeriodLoss(f)
        self.alt = None  # the alternate grower of the episode in progress
        if state is None:
            self.n_obs = np.zeros(n, dtype=np.int64)
            self.mu = np.zeros(n)
            self.var = np.zeros(n)
            self.cusum = np.zeros(n)
            self.calm_row = np.zeros(n, dtype=np.int64)  # last row at which the CUSUM was 0
            self.alt_periods = np.zeros(n, dtype=np.int64)
            self.alt_mean = np.zeros(n)
            self.alt_var = np.zeros(n)
            self.episode_start = 0
            self.events = np.zeros((0, 3), dtype=np.int64)
            return
        for name in ("n_obs", "calm_row", "alt_periods", "events"):
            setattr(self, name, np.array(state[f"drift_{name}"], dtype=np.int64))
        for name in ("mu", "var", "cusum", "alt_mean", "alt_var"):
            setattr(self, name, np.array(state[f"drift_{name}"], dtype=np.float64))
        self.episode_start = int(state["drift_episode_start"])
        grower.rebuilds = bool(state["drift_rebuilds"])
        epoch = self._epoch()
        self.loss.set_state(state, "drift_", f, epoch)
        if "drift_alt_node_var" in state:
            alt_state = {
                k[len("drift_alt_") :]: v for k, v in state.items() if k.startswith("drift_alt_")
            }
            forest = Forest.from_state(f.schema, f.prior, alt_state)
            self.alt = make_grower(forest, alt_state)
            self.alt.trees = np.array(alt_state["trees"], dtype=np.int64)
            self.alt.rebuilds = bool(alt_state["rebuilds"])
            self.alt_loss.set_state(state, "drift_alt_", forest, epoch)

    # learning -------------------------------------------------------------------------------
    def learn(self, rows: np.ndarray) -> None:
        """Score, then learn, ``rows`` piece by piece up to each grace-period boundary (where
        trees may split); the detectors and alternates are updated every monitoring period."""
        g, start, n = self.g, 0, rows.shape[0]
        while start < n:
            stop = min(n, start + g - self.grower.rows_seen % g)
            piece = rows[start:stop]
            offset = self.grower.rows_seen % self.period
            scored = piece[: max(0, self.scored - offset)]
            epoch = self._epoch()
            if scored.shape[0]:
                self.loss.add(self.grower.forest, scored, self.all_trees, epoch)
            _learn(self.grower, piece, self.loss)
            if self.alt is not None:
                if scored.shape[0]:
                    self.alt_loss.add(self.alt.forest, scored, self.alt.trees, epoch)
                _learn(self.alt, piece, self.alt_loss)
            start = stop
            if self.grower.rows_seen % self.period == 0:
                self._period_end()

    def _epoch(self) -> int:
        """The leaf-count epoch the scores use (``SNAPSHOT_PERIODS`` periods)."""
        return self.grower.rows_seen // (self.period * SNAPSHOT_PERIODS)

    def _period_end(self) -> None:
        scale, g = LOSS_SCALE, self.scored
        mean = self.loss.sum / (g * scale)
        row_var = np.maximum(self.loss.sq / (g * scale * scale) - mean * mean, MIN_VAR)
        alarmed = self._detect(mean, row_var)
        if self.alt is not None:
            self._compare(mean, self.alt_loss.sum / (g * scale))
        self.loss.reset()
        self.alt_loss.reset()
        if alarmed.size:
            self._start_alternates(alarmed)

    def _detect(self, mean: np.ndarray, row_var: np.ndarray) -> np.ndarray:
        """Update every tree's CUSUM with its period mean loss; the trees that alarm."""
        watching = self.n_obs >= WARMUP
        z = (mean - self.mu) / np.sqrt(np.maximum(self.var, MIN_VAR) / self.scored)
        self.cusum = np.where(watching, np.maximum(0.0, self.cusum + z - K_ALLOWANCE), 0.0)
        self.n_obs += 1
        w = _ewma_weight(self.n_obs, HORIZON)
        self.mu += w * (mean - self.mu)
        self.var += w * (row_var - self.var)
        rows = self.grower.rows_seen
        self.calm_row[self.cusum == 0.0] = rows
        alternating = np.zeros(self.mu.size, dtype=bool)
        if self.alt is not None:
            alternating[self.alt.trees] = True
        alarmed = np.flatnonzero((self.cusum > THRESHOLD) & ~alternating)
        self.cusum[alarmed] = 0.0
        return alarmed

    def _compare(self, main_mean: np.ndarray, alt_mean: np.ndarray) -> None:
        """Update the main-minus-alternate loss difference of the trees under alternation;
        swap the alternates that are better, drop those that ran out of time."""
        assert self.alt is not None  # called during an episode
        trees = self.alt.trees
        d = main_mean[trees] - alt_mean[trees]
        self.alt_periods[trees] += 1
        w = _ewma_weight(self.alt_periods[trees], SWAP_HORIZON)
        prev = self.alt_mean[trees]
        self.alt_mean[trees] = prev + w * (d - prev)
        self.alt_var[trees] += w * ((d - prev) ** 2 - self.alt_var[trees])
        se = np.sqrt(self.alt_var[trees] * w / (2.0 - w))
        old = self.alt_periods[trees] >= MIN_ALT_PERIODS
        ev = self.events
        alarmed = np.zeros(self.mu.size, dtype=bool)
        alarmed[ev[(ev[:, 2] == 0) & (ev[:, 0] >= self.episode_start), 1]] = True
        gain = np.where(alarmed[trees], MIN_SWAP_GAIN, QUIET_SWAP_GAIN)
        better = old & (self.alt_mean[trees] > np.maximum(SWAP_Z * se, gain))
        expired = ~better & (self.alt_periods[trees] >= MAX_ALT_PERIODS)
        if better.any():
            self._swap(trees[better])
        if better.any() or expired.any():
            self._end_alternates(trees[better | expired], trees[expired])

    def _start_alternates(self, alarmed: np.ndarray) -> None:
        """The first alarm starts an episode: every tree gets an alternate grown from the
        estimated change point (fed the buffered rows since then). A tree that alarms during
        an episode after its alternate ended gets a new one."""
        main = self.grower
        main.rebuilds = False
        self._record(alarmed, "alarm")
        if self.alt is not None:
            self._reset_comparison(alarmed)
            self.alt.trees = np.union1d(self.alt.trees, alarmed)
            self._join(alarmed)
            return
        self._reset_comparison(self.all_trees)
        g = self.g
        # the latest of the alarmed trees' change points: a tree whose CUSUM happened to be
        # above 0 before the change would otherwise feed the alternates pre-change rows
        earliest = max(int(self.calm_row[alarmed].max()), main.rows_seen - main._buf_len)
        earliest = -(-earliest // g) * g  # a period boundary, so the alternate stays aligned
        self.episode_start = earliest
        alt = self.make_grower(Forest(main.forest.schema, prior=main.forest.prior), None)
        alt.trees = self.all_trees.copy()
        self.alt = alt
        alt.learn(self._buffered_since(earliest))

    def _reset_comparison(self, trees: np.ndarray) -> None:
        self.alt_periods[trees] = 0
        self.alt_mean[trees] = 0.0
        self.alt_var[trees] = 0.0

    def _join(self, trees: np.ndarray) -> None:
        """Trees that alarm during an episode get fresh alternates that first learn the
        alternate grower's buffer (the episode's rows, or its last ``replay_rows``), so every
        buffered row the replay may move is counted in the tree."""
        alt = self.alt
        assert alt is not None  # called during an episode
        f = alt.forest
        _replace_trees(alt, Forest(f.schema, prior=f.prior), trees)
        alt._enforce_budget(alt._eligible(f.roots[trees]))
        n = alt._buf_len
        if n:
            due = alt.stats.add(alt._buf[:n], grace=alt._look_gap, trees=trees)
            alt._grow(np.sort(due))

    def rows_since_change(self, trees: np.ndarray) -> np.ndarray:
        """The replay buffer's rows since the estimated change point of ``trees`` (the latest
        of theirs, as an episode's alternates start from), in stream order: what a
        conditional restarted at their alarm relearns from (DTSL's regressions)."""
        main = self.grower
        earliest = max(int(self.calm_row[trees].max()), main.rows_seen - main._buf_len)
        return self._buffered_since(earliest)

    def _buffered_since(self, row: int) -> np.ndarray:
        """The replay buffer's rows from stream row ``row`` on, in stream order."""
        main = self.grower
        k = min(main._buf_len, main.rows_seen - row)
        if k <= 0:
            return main._buf[:0]
        pos = (main._buf_pos - k + np.arange(k)) % main.settings.replay_rows
        return main._buf[pos]

    def _swap(self, trees: np.ndarray) -> None:
        """Put the alternate trees of ``trees`` into the main forest; their leaves keep the
        alternate's split statistics where the main budget gives them a slot."""
        main, f, st = self.grower, self.grower.forest, self.grower.stats
        assert self.alt is not None  # called during an episode
        donor, donor_st = self.alt.forest, self.alt.stats
        self._forget_buffer_before(self._alternates_full_weight_row())
        map_donor = _replace_trees(main, donor, trees)
        donor_leaves = np.flatnonzero(map_donor >= 0)
        donor_leaves = donor_leaves[donor.var[donor_leaves] < 0]
        new = map_donor[donor_leaves]
        main._enforce_budget(main._eligible(new.astype(np.int32)))
        to_slot, from_slot = f.slot[new], donor.slot[donor_leaves]
        both = (to_slot >= 0) & (from_slot >= 0)
        for name in ("tot", "stats", "n", "last_attempt", "attempts"):
            getattr(st, name)[to_slot[both]] = getattr(donor_st, name)[from_slot[both]]
        # the swapped trees start afresh: a new reference loss for their detectors
        self.n_obs[trees] = 0
        self.mu[trees] = 0.0
        self.var[trees] = 0.0
        self.cusum[trees] = 0.0
        self._record(trees, "swap")

    def _alternates_full_weight_row(self) -> int:
        """The first stream row the alternates count at full weight: the episode's start, or
        with forgetting the alternate grower's last halving."""
        interval = getattr(self.alt, "interval", None)
        if interval is None:
            return self.episode_start
        return self.episode_start + self.alt.rows_seen // interval * interval  # type: ignore[union-attr]  # (None has no interval)

    def _forget_buffer_before(self, row: int) -> None:
        """Keep only the buffered rows from stream row ``row`` on (moved to the front of the
        ring): a swapped tree counted only those at full weight, and replay must not move other
        rows into its leaves' statistics (a child's statistics must never exceed its counts)."""
        main = self.grower
        kept = self._buffered_since(row)
        k = kept.shape[0]
        if k == main._buf_len and (k < main.settings.replay_rows or main._buf_pos == 0):
            return  # already in place
        main._buf[:k] = kept
        main._buf_len, main._buf_pos = k, k % max(main.settings.replay_rows, 1)
        main.index_buffer()

    def _end_alternates(self, done: np.ndarray, dropped: np.ndarray) -> None:
        """Stop growing the alternates of ``done``; the episode ends with the last one."""
        self._record(dropped, "drop")
        alt = self.alt
        assert alt is not None  # called during an episode
        alt.trees = np.setdiff1d(alt.trees, done)
        if alt.trees.size == 0:
            self.alt = None
            return
        leaves = alt.forest.leaves()
        stop = leaves[np.isin(alt.forest.tree[leaves], done) & (alt.forest.slot[leaves] >= 0)]
        alt.stats.release(alt.forest.slot[stop])

    def _record(self, trees: np.ndarray, kind: str) -> None:
        if trees.size == 0:
            return
        rows = np.full(trees.size, self.grower.rows_seen, dtype=np.int64)
        code = np.full(trees.size, EVENTS.index(kind), dtype=np.int64)
        self.events = np.concatenate([self.events, np.column_stack([rows, trees, code])])

    # reporting and state --------------------------------------------------------------------
    def summary(self, recent: int = 20) -> dict:
        """Counts of alarms, swaps and drops, the trees under alternation and the last events."""
        codes = self.events[:, 2]
        return {
            **{f"{kind}s": int((codes == i).sum()) for i, kind in enumerate(EVENTS)},
            "alternating": [] if self.alt is None else self.alt.trees.tolist(),
            "recent": [
                {"row": int(r), "tree": int(t), "event": EVENTS[c]}
                for r, t, c in self.events[-recent:]
            ],
        }

    def get_state(self) -> dict:
        state = {
            f"drift_{name}": getattr(self, name).copy()
            for name in (
                "n_obs",
                "calm_row",
                "alt_periods",
                "events",
                "mu",
                "var",
                "cusum",
                "alt_mean",
                "alt_var",
            )
        }
        state["drift_episode_start"] = np.array(self.episode_start, dtype=np.int64)
        state["drift_rebuilds"] = np.array(self.grower.rebuilds)
        epoch = self._epoch()
        state.update(self.loss.get_state("drift_", epoch))
        if self.alt is not None:
            alt = {
                **self.alt.forest.get_state(),
                **self.alt.get_state(),
                "trees": self.alt.trees.copy(),
                "rebuilds": np.array(self.alt.rebuilds),
            }
            state.update({f"drift_alt_{k}": v for k, v in alt.items()})
            state.update(self.alt_loss.get_state("drift_alt_", epoch))
        return state
