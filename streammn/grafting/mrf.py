"""Pairwise MRF parameters as one flat vector: unary tables, then one table per active edge.

``log P(x) = sum_i theta_i[x_i] + sum_(i,j) theta_ij[x_i, x_j] - log Z``. The tables are full
(over-complete) log-potentials, one indicator feature per cell, which is the parametrisation of
the grafting paper: its groups are a node's ``card_i`` weights and an edge's
``card_i * card_j`` weights. :class:`PairwiseLayout` says where each table lives in the flat
vector and gives the node -> incident edges index that belief propagation and the conditional
kernels walk.
"""

from __future__ import annotations

import numpy as np

from streammn.features import FeatureSet
from streammn.network.model import MarkovNetwork
from streammn.schema import Schema
from streammn.errors import GraftingError


class PairwiseLayout:
    """Where the tables of a pairwise MRF live in the flat parameter vector.

    Parameters
    ----------
    cards : array of int
        Cardinality of every variable.
    edges : (m, 2) array of int
        The edges ``(i, j)`` with ``i < j``, in the order of their tables.

    Attributes
    ----------
    uoff : int64[n + 1]
        Unary table of variable ``i`` is ``theta[uoff[i]:uoff[i + 1]]``.
    eoff : int64[m + 1]
        Table of edge ``k`` (row-major ``card_i x card_j``) is ``theta[eoff[k]:eoff[k + 1]]``;
        ``eoff[0] == uoff[-1]``.
    adj_ptr, adj_edge : int64
        CSR index node -> incident edges: ``adj_edge[adj_ptr[v]:adj_ptr[v + 1]]``.
    """

    def __init__(self, cards, edges):
        self.cards = np.ascontiguousarray(cards, dtype=np.int64)
        n = self.cards.shape[0]
        self.edges = np.ascontiguousarray(np.asarray(edges, dtype=np.int64).reshape(-1, 2))
        if self.edges.size and not bool(
            (self.edges[:, 0] < self.edges[:, 1]).all()
            and (self.edges[:, 0] >= 0).all()
            and (self.edges[:, 1] < n).all()
        ):
            raise GraftingError("edges must be pairs (i, j) with 0 <= i < j < n_vars")
        self.uoff = np.concatenate([[0], np.cumsum(self.cards)]).astype(np.int64)
        sizes = self.cards[self.edges[:, 0]] * self.cards[self.edges[:, 1]]
        self.eoff = (self.uoff[-1] + np.concatenate([[0], np.cumsum(sizes)])).astype(np.int64)
        ends = self.edges.ravel()
        order = np.argsort(ends, kind="stable")
        self.adj_edge = np.ascontiguousarray(order // 2, dtype=np.int64)
        self.adj_ptr = np.concatenate([[0], np.cumsum(np.bincount(ends, minlength=n))]).astype(
            np.int64
        )

    @property
    def n_vars(self) -> int:
        return self.cards.shape[0]

    @property
    def n_edges(self) -> int:
        return self.edges.shape[0]

    @property
    def size(self) -> int:
        """Length of the flat parameter vector."""
        return int(self.eoff[-1])

    def group_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, sizes)`` of every group: the n node tables, then the m edge tables."""
        bounds = np.concatenate([self.uoff, self.eoff[1:]])
        return bounds[:-1].copy(), np.diff(bounds)

    def degrees(self) -> np.ndarray:
        return np.diff(self.adj_ptr)


def to_markov_network(schema: Schema, layout: PairwiseLayout, theta) -> MarkovNetwork:
    """The MRF as a :class:`MarkovNetwork`: one feature ``X_i = a`` per unary cell and one
    feature ``X_i = a and X_j = b`` per edge cell, weighted by the log-potential."""
    theta = np.asarray(theta, dtype=np.float64)
    cards = layout.cards
    n_unary = int(layout.uoff[-1])
    u_var = np.repeat(np.arange(layout.n_vars), cards)
    u_val = np.arange(n_unary) - layout.uoff[u_var]
    sizes = np.diff(layout.eoff)
    e_idx = np.repeat(np.arange(layout.n_edges), sizes)
    cell = np.arange(int(sizes.sum())) - (layout.eoff[e_idx] - n_unary)
    ci, cj = layout.edges[e_idx, 0], layout.edges[e_idx, 1]
    a, b = cell // cards[cj], cell % cards[cj]
    n_e = e_idx.shape[0]
    var = np.empty(n_unary + 2 * n_e, dtype=np.int32)
    val = np.empty(n_unary + 2 * n_e, dtype=np.uint8)
    var[:n_unary], val[:n_unary] = u_var, u_val
    var[n_unary::2], var[n_unary + 1 :: 2] = ci, cj
    val[n_unary::2], val[n_unary + 1 :: 2] = a, b
    ptr = np.concatenate([np.arange(n_unary + 1), n_unary + 2 * np.arange(1, n_e + 1)])
    fs = FeatureSet(
        schema, theta[: layout.size], ptr, var, val, np.ones(var.shape[0], bool), validate=False
    )
    return MarkovNetwork(schema, fs)
