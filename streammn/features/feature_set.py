"""Weighted conjunctive features: the common currency of trees, dependency networks and MNs.

A feature is a conjunction of conditions ``X_v = a`` (``eq=True``) or ``X_v != a``
(``eq=False``) with a real weight; it contributes its weight to a row's log score when every
condition holds. Decision-tree CPDs (DTSL), DN2MN output and pairwise MRFs (grafting) are all
sets of such features, so one flat representation and one set of kernels
(:mod:`streammn.network.loglinear`) serve all of them.

:class:`FeatureSet` stores ``F`` features as CSR-style arrays::

    weights[F]                 float64
    ptr[F+1]                   conditions of feature f are ptr[f]:ptr[f+1]
    var[C], val[C], eq[C]      int32 / uint8 / bool per condition

Features are kept in canonical form (see :func:`canonical_conditions`): conditions sorted by
variable, at most the conditions needed, binary negations turned into equalities, so that equal
features have equal condition lists and :meth:`FeatureSet.merge_duplicates` can sum them.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from streammn.schema import Schema
from streammn.schema.vocabulary import name_text
from streammn.errors import ModelError

Condition = tuple[int, int, bool]  # (variable, value, eq)


def canonical_conditions(
    conditions: Iterable[Condition], cardinalities
) -> tuple[Condition, ...] | None:
    """Reduce a conjunction to canonical form, or ``None`` when it can never hold.

    Per variable the conditions define a set of allowed values. All values allowed: the
    variable is dropped. One value: ``X_v = a``. All but one: ``X_v != b``. Otherwise the
    ``!=`` conditions that exclude the rest, in increasing value order.
    """
    allowed: dict[int, set[int]] = {}
    for v, a, eq in conditions:
        v, a = int(v), int(a)
        card = int(cardinalities[v])
        if not 0 <= a < card:
            raise ModelError(
                f"condition value {a} out of range for variable {v} (cardinality {card})"
            )
        cur = allowed.setdefault(v, set(range(card)))
        if eq:
            cur.intersection_update((a,))
        else:
            cur.discard(a)
    out: list[Condition] = []
    for v in sorted(allowed):
        vals = allowed[v]
        card = int(cardinalities[v])
        if not vals:
            return None
        if len(vals) == card:
            continue
        if len(vals) == 1:
            out.append((v, next(iter(vals)), True))
        else:
            out.extend((v, b, False) for b in range(card) if b not in vals)
    return tuple(out)


def distinct_sorted(keys: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array, sorted: ``np.unique`` by sorting, which for
    millions of int64 keys is an order of magnitude faster than numpy 2's hash-based path. The
    stable sort is numpy's radix/merge sort: 2x faster on random keys than the default, and
    close to linear on the nearly sorted keys the callers build (feature-major)."""
    keys = np.sort(keys, kind="stable")
    if keys.size == 0:
        return keys
    keep = np.empty(keys.size, dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


class FeatureSet:
    """A set of weighted conjunctive features over a :class:`~streammn.schema.Schema`.

    ``validate=False`` skips the O(conditions) range checks of variables and values; only for
    arrays derived from an already validated set (selection, merging, DN2MN output).
    """

    def __init__(
        self,
        schema: Schema,
        weights: npt.ArrayLike,
        ptr: npt.ArrayLike,
        var: npt.ArrayLike,
        val: npt.ArrayLike,
        eq: npt.ArrayLike,
        validate: bool = True,
    ):
        self.schema = schema
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.ptr = np.ascontiguousarray(ptr, dtype=np.int64)
        self.var = np.ascontiguousarray(var, dtype=np.int32)
        self.val = np.ascontiguousarray(val, dtype=np.uint8)
        self.eq = np.ascontiguousarray(eq, dtype=np.bool_)
        F = self.weights.shape[0]
        if self.ptr.shape != (F + 1,) or self.ptr[0] != 0 or self.ptr[-1] != self.var.shape[0]:
            raise ModelError("ptr must have n_features + 1 entries from 0 to n_conditions")
        if not (self.var.shape == self.val.shape == self.eq.shape):
            raise ModelError("var, val and eq must have one entry per condition")
        if validate and self.var.size:
            if self.var.min() < 0 or self.var.max() >= schema.n_vars:
                raise ModelError("condition variable out of range")
            if (self.val >= schema.cardinalities[self.var]).any():
                raise ModelError("condition value out of range")

    # construction -------------------------------------------------------------------------
    @classmethod
    def from_features(
        cls,
        schema: Schema,
        features: Iterable[tuple[float, Sequence[Condition]]],
        canonical: bool = True,
    ) -> "FeatureSet":
        """Build from ``(weight, [(var, value, eq), ...])`` pairs.

        With ``canonical=True`` (default) each conjunction is canonicalised and features that
        can never hold are dropped. Duplicates are kept; see :meth:`merge_duplicates`.
        """
        weights, ptr, var, val, eq = [], [0], [], [], []
        conds: Sequence[Condition] | None
        for w, conds in features:
            conds = tuple((int(v), int(a), bool(e)) for v, a, e in conds)
            if canonical:
                conds = canonical_conditions(conds, schema.cardinalities)
                if conds is None:
                    continue
            weights.append(float(w))
            for v, a, e in conds:
                var.append(v)
                val.append(a)
                eq.append(e)
            ptr.append(len(var))
        return cls(schema, weights, ptr, var, val, eq)

    @classmethod
    def empty(cls, schema: Schema) -> "FeatureSet":
        return cls(schema, [], [0], [], [], [])

    @classmethod
    def concat(cls, schema: Schema, parts: Sequence["FeatureSet"]) -> "FeatureSet":
        """All features of ``parts``, in order."""
        if not parts:
            return cls.empty(schema)
        offsets = np.cumsum([0] + [p.var.shape[0] for p in parts[:-1]])
        ptr = np.concatenate([[0]] + [p.ptr[1:] + o for p, o in zip(parts, offsets)])
        return cls(
            schema,
            np.concatenate([p.weights for p in parts]),
            ptr,
            np.concatenate([p.var for p in parts]),
            np.concatenate([p.val for p in parts]),
            np.concatenate([p.eq for p in parts]),
        )

    # access -------------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self.weights.shape[0]

    def __len__(self) -> int:
        return self.n_features

    def conditions(self, f: int) -> tuple[Condition, ...]:
        s, e = self.ptr[f], self.ptr[f + 1]
        return tuple(
            (int(v), int(a), bool(q)) for v, a, q in zip(self.var[s:e], self.val[s:e], self.eq[s:e])
        )

    def __iter__(self):
        for f in range(self.n_features):
            yield float(self.weights[f]), self.conditions(f)

    def to_list(self) -> list[tuple[float, tuple[Condition, ...]]]:
        return list(self)

    def text(self, f: int) -> str:
        """Feature ``f``'s conditions as a person reads them, with the variables' names and
        their states' names where they have them: ``country=US & returning!=true``."""
        parts = []
        for v, a, eq in self.conditions(f):
            var = self.schema[v]
            value = var.state_names[a] if var.state_names is not None else a
            parts.append(f"{var.name}{'=' if eq else '!='}{name_text(value)}")
        return " & ".join(parts) if parts else "(always)"

    def scope(self, f: int) -> tuple[int, ...]:
        """Sorted distinct variables feature ``f`` tests."""
        return tuple(sorted(set(self.var[self.ptr[f] : self.ptr[f + 1]].tolist())))

    def variable_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every pair of distinct variables tested together by a feature, vectorised:
        ``(i, j, feature)`` arrays with ``i < j``, one entry per (pair, feature)."""
        f_of_cond = np.repeat(np.arange(self.n_features, dtype=np.int64), self.lengths())
        n_vars = self.schema.n_vars
        keys = distinct_sorted(f_of_cond * n_vars + self.var)  # distinct (feature, var)
        fv = np.stack([keys // n_vars, keys % n_vars], axis=1)
        i, j, f = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0, np.int64)]
        for d in range(1, int(self.lengths().max(initial=0))):  # variables d apart in a feature
            same = fv[:-d, 0] == fv[d:, 0]
            i.append(fv[:-d, 1][same])
            j.append(fv[d:, 1][same])
            f.append(fv[:-d, 0][same])
        return np.concatenate(i), np.concatenate(j), np.concatenate(f)

    def lengths(self) -> np.ndarray:
        return np.diff(self.ptr)

    def features_by_variable(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR index variable -> features that mention it: ``(var_ptr[n+1], var_features)``."""
        n = self.schema.n_vars
        f_of_cond = np.repeat(np.arange(self.n_features, dtype=np.int64), self.lengths())
        keys = distinct_sorted(self.var.astype(np.int64) * max(self.n_features, 1) + f_of_cond)
        counts = np.bincount(keys // max(self.n_features, 1), minlength=n)
        var_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return var_ptr, np.ascontiguousarray(keys % max(self.n_features, 1), dtype=np.int64)

    def with_weights(self, weights: npt.ArrayLike) -> "FeatureSet":
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != self.weights.shape:
            raise ModelError(f"expected {self.n_features} weights, got {weights.shape}")
        return FeatureSet(
            self.schema, weights, self.ptr, self.var, self.val, self.eq, validate=False
        )

    def select(self, mask_or_index: npt.ArrayLike) -> "FeatureSet":
        """The features picked by a boolean mask or an index array, in that order."""
        idx = np.arange(self.n_features)[mask_or_index]  # type: ignore[index]  # numpy's stub
        lengths = self.lengths()[idx]
        ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        # condition c of the k-th picked feature is self.ptr[idx[k]] + (c - ptr[k])
        cond_idx = np.repeat(self.ptr[idx] - ptr[:-1], lengths) + np.arange(ptr[-1], dtype=np.int64)
        return FeatureSet(
            self.schema,
            self.weights[idx],
            ptr,
            self.var[cond_idx],
            self.val[cond_idx],
            self.eq[cond_idx],
            validate=False,
        )

    def merge_duplicates(self, drop_zero: bool = True, tol: float = 0.0) -> "FeatureSet":
        """Sum the weights of features with identical (canonical) conditions.

        Features whose summed weight is within ``tol`` of zero are dropped when ``drop_zero``.
        The first occurrence's position decides the order of the result. Vectorised: features
        go through a hash table and equal hashes are confirmed by comparing the conditions, so
        a hash collision never merges different features.
        """
        from streammn.features._merge import duplicate_groups  # numba kernels, imported lazily

        group, first = duplicate_groups(self.ptr, self.var, self.val, self.eq)
        sums = np.bincount(group, weights=self.weights, minlength=first.shape[0])
        keep = np.flatnonzero(np.abs(sums) > tol) if drop_zero else np.arange(first.shape[0])
        return self.select(first[keep]).with_weights(sums[keep])

    def equals(self, other: "FeatureSet", atol: float = 0.0) -> bool:
        return (
            self.schema == other.schema
            and np.array_equal(self.ptr, other.ptr)
            and np.array_equal(self.var, other.var)
            and np.array_equal(self.val, other.val)
            and np.array_equal(self.eq, other.eq)
            and np.allclose(self.weights, other.weights, rtol=0, atol=atol)
        )

    def __repr__(self) -> str:
        return (
            f"FeatureSet({self.n_features} features, {self.var.shape[0]} conditions, "
            f"{self.schema.n_vars} variables)"
        )
