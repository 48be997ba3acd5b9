"""Stationary distribution of the delay chain by sparse direct solve.

The chain is built on the full truncated state space (Appendix A.3) but only a part of it is
recurrent (application-limited states need ``B = 0``, ``w >= r``; many ``(w, B)`` pairs are
never visited). We keep the closed communicating class reached from the application-limited
start state, then solve ``pi (I - Q) = 0``, ``sum(pi) = 1`` by fixing ``pi_0`` and solving the
remaining ``n - 1`` equations with SuperLU (the standard deflation for an irreducible chain,
e.g. Stewart, *Introduction to the Numerical Solution of Markov Chains*, Section 2.3).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import breadth_first_order, connected_components

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay.chain import Chain


def start_state(chain: Chain) -> int:
    """The application-limited state with the smallest window that admits ``r`` packets."""
    w0 = max(1, math.ceil(chain.params.r - 1e-9))
    return int(chain.space.index(w0, 0, 0))


def recurrent_class(Q: sp.csr_matrix, start: int) -> np.ndarray:
    """Sorted indices of the closed communicating class reachable from ``start``."""
    reach = np.sort(breadth_first_order(Q, start, directed=True, return_predecessors=False))
    sub = Q[reach][:, reach]
    ncomp, labels = connected_components(sub, directed=True, connection="strong")
    if ncomp == 1:
        return reach
    # A closed class has no edge leaving it; within the reachable set every edge stays inside.
    coo = sub.tocoo()
    leaving = np.zeros(ncomp, dtype=bool)
    cross = labels[coo.row] != labels[coo.col]
    leaving[labels[coo.row[cross]]] = True
    closed = np.flatnonzero(~leaving)
    if closed.size != 1:
        raise ParameterError(
            f"the delay chain has {closed.size} closed classes; the parameters do not define a "
            "single steady state")
    return reach[labels == closed[0]]


def _deflated_solve(A: sp.csc_matrix, Q: sp.csr_matrix, pivot: int, order: np.ndarray | None = None) -> np.ndarray:
    """Fix ``pi[pivot] = 1``, drop its balance equation, solve the rest, normalize.

    ``order`` (a permutation of the states) is applied before the LU factorization. With the
    backlog-major order of :func:`solve_chain` the system is nearly block-banded in the backlog
    and SuperLU without column reordering or pivoting (safe: the deflated generator is a
    nonsingular M-matrix, column diagonally dominant) fills in an order of magnitude less
    than with COLAMD.
    """
    n = A.shape[0]
    if order is None:
        order = np.arange(n)
    order = order[order != pivot]
    M = A[order][:, order].tocsc()
    rhs = -A[order, pivot].toarray().ravel()
    try:
        lu = spla.splu(M, permc_spec="NATURAL", diag_pivot_thresh=0.0)
        x = lu.solve(rhs)
    except RuntimeError:  # a zero pivot: fall back to a fill-reducing order with pivoting
        x = spla.spsolve(M, rhs, permc_spec="COLAMD")
    pi = np.empty(n)
    pi[pivot] = 1.0
    pi[order] = np.asarray(x).ravel()
    pi = np.where(pi < 0, 0.0, pi)  # round-off below zero
    return pi / pi.sum()


def stationary(Q: sp.csr_matrix, *, pivot: int = 0, order: np.ndarray | None = None, tol: float = 1e-10) -> tuple[np.ndarray, float]:
    """Stationary vector of an irreducible row-stochastic sparse matrix and its residual
    ``||pi Q - pi||_1`` (computed without the self-loops).

    The pivot (the state whose equation is dropped and whose probability is fixed) should
    carry much mass: fixing a nearly-empty state makes the system ill-conditioned (at tiny
    loss rates the mass sits on application-limited states). :func:`solve_chain` pivots on
    the application-limited start state, to which the chain returns after every loss; if the
    residual still exceeds ``tol`` we re-solve pivoting on the heaviest state and keep the
    better of the two.
    """
    n = Q.shape[0]
    if n == 1:
        return np.ones(1), 0.0
    # The generator with its diagonal taken as minus the off-diagonal row sums, not 1 - q_ss:
    # at small loss rates q_ss = 1 - p and 1 - q_ss would cancel (Grassmann, Taksar, Heyman).
    off = Q.tolil()
    off.setdiag(0.0)
    off = off.tocsr()
    off.eliminate_zeros()
    out = np.asarray(off.sum(axis=1)).ravel()
    A = (sp.diags(out) - off).T.tocsc()

    def residual(v):
        return float(np.abs(off.T @ v - v * out).sum())

    pi = _deflated_solve(A, Q, pivot, order)
    res = residual(pi)
    if res > tol:
        heavy = int(np.argmax(pi))
        if heavy != pivot:
            pi2 = _deflated_solve(A, Q, heavy, order)
            res2 = residual(pi2)
            if res2 < res:
                pi, res = pi2, res2
    return pi, res


def solve_chain(chain: Chain) -> tuple[np.ndarray, np.ndarray]:
    """(pi over all states of ``chain.space``, indices of the recurrent class)."""
    rc = recurrent_class(chain.Q, start_state(chain))
    sub = chain.Q[rc][:, rc]
    # Pivot on the application-limited state of smallest window in the class (the start state
    # may be transient: the window can pass w0 while still backlogged).
    w, B, l = chain.space.decode(rc)
    al = np.flatnonzero((B == 0) & (l == 0) & (w >= chain.params.r - 1e-9))
    pivot = int(al[np.argmin(w[al])]) if al.size else 0
    order = np.lexsort((w, l, B))  # backlog-major
    pi_rc, residual = stationary(sub, pivot=pivot, order=order)
    pi = np.zeros(chain.space.n)
    pi[rc] = pi_rc
    chain.residual = residual
    return pi, rc
