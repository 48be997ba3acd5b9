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


def stationary(Q: sp.csr_matrix) -> np.ndarray:
    """Stationary vector of an irreducible row-stochastic sparse matrix."""
    n = Q.shape[0]
    if n == 1:
        return np.ones(1)
    A = (sp.identity(n, format="csr") - Q).T.tocsc()
    M = A[1:, 1:]
    rhs = -A[1:, 0].toarray().ravel()
    x = spla.spsolve(M, rhs, permc_spec="COLAMD")
    pi = np.concatenate([[1.0], np.asarray(x).ravel()])
    pi = np.where(pi < 0, 0.0, pi)  # round-off below zero
    return pi / pi.sum()


def solve_chain(chain: Chain) -> tuple[np.ndarray, np.ndarray]:
    """(pi over all states of ``chain.space``, indices of the recurrent class)."""
    rc = recurrent_class(chain.Q, start_state(chain))
    sub = chain.Q[rc][:, rc]
    pi_rc = stationary(sub)
    pi = np.zeros(chain.space.n)
    pi[rc] = pi_rc
    return pi, rc
