"""Stationary distribution of the delay chain: sparse direct solve, or an iterative one held to
its residual.

The chain is built on the full truncated state space (Appendix A.3) but only a part of it is
recurrent (application-limited states need ``B = 0``, ``w >= r``; many ``(w, B)`` pairs are
never visited). We keep the closed communicating class reached from the application-limited
start state, then solve ``pi (I - Q) = 0``, ``sum(pi) = 1`` by fixing ``pi_0`` and solving the
remaining ``n - 1`` equations (the standard deflation for an irreducible chain, e.g. Stewart,
*Introduction to the Numerical Solution of Markov Chains*, Section 2.3).

Two solvers of the deflated system: SuperLU on a backlog-major order (exact up to round-off) and,
for classes of at least :data:`ITERATIVE_MIN_STATES` states, BiCGSTAB (:func:`bicgstab`)
preconditioned by one forward Gauss–Seidel sweep in the chain's *loss order* (:func:`loss_order`:
every loss-free transition goes forward in it, so the sweep carries the mass along whole loss-free
paths and only the losses are left to the Krylov iteration; Stewart
Sections 3.2, 4.4 on Gauss–Seidel and preconditioned projection methods for Markov chains). The
iterative answer is kept only if its residual ``||pi Q - pi||_1`` is at most
:data:`ITERATIVE_RESIDUAL_TOL` (1e-14, four orders below the 1e-10 the direct solve is held to);
otherwise the direct solve runs. At the classes ``tcpdelay advise`` meets with correlated loss
(15 000-52 000 states) the sparse LU fills to 16-25 M entries and takes 0.3-1.8 s each on the
2-core development machine; the iteration takes 15-30 preconditioned steps, 0.03-0.1 s.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse.csgraph import breadth_first_order, connected_components

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay.chain import Chain, start_index

ITERATIVE_MIN_STATES = 2_000
"""Recurrent classes at least this large are solved iteratively first (:func:`stationary`); below
it the direct solve takes a few milliseconds and its result is kept bit for bit."""
ITERATIVE_RESIDUAL_TOL = 1e-14
"""The largest ``||pi Q - pi||_1`` (pi summing to 1) an iterative solution may have to be kept."""
ITERATIVE_RTOL = 1e-14
"""BiCGSTAB's stopping tolerance (2-norm residual of the deflated system relative to its right side)."""
ITERATIVE_MAX_STEPS = 400
"""BiCGSTAB steps before falling back to the direct solve."""


def start_state(chain: Chain) -> int:
    """The application-limited state with the smallest window that admits ``r`` packets."""
    return start_index(chain.params, chain.space)


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


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """Inner product by NumPy's pairwise sum, not BLAS: single-threaded, so its result and its
    speed do not depend on the BLAS thread pool (a threaded ``ddot`` on a machine shared with
    other jobs made each step several times slower)."""
    return float(np.add.reduce(a * b))


def bicgstab(matvec, precond, b: np.ndarray, *, rtol: float, max_steps: int,
             shadow: np.ndarray | None = None) -> np.ndarray | None:
    """Right-preconditioned BiCGSTAB for ``A x = b`` from ``x = 0`` (van der Vorst, SIAM J. Sci.
    Stat. Comput. 13(2):631-644, 1992; the algorithm of Barrett et al., *Templates for the
    Solution of Linear Systems*, SIAM 1994, Section 2.3.8). ``matvec(v) = A v``,
    ``precond(v) ≈ A⁻¹ v``. Stops when the recursive residual's 2-norm is at most
    ``rtol·||b||``; None on a breakdown (``ρ = 0`` or ``ω = 0``), a non-finite value, or after
    ``max_steps`` steps. Every inner product is :func:`_dot`. ``shadow`` is the fixed vector
    ``r̂`` [default ``b``]; where ``b`` has a single entry (a pivot with one way out) the first
    step can make ``r`` orthogonal to it (``ρ = 0``), and another shadow avoids that. The
    answer is judged by the caller's true residual either way."""
    with np.errstate(over="ignore", invalid="ignore"):   # a divergence ends as a non-finite value: None
        return _bicgstab(matvec, precond, b, rtol=rtol, max_steps=max_steps, shadow=shadow)


def _bicgstab(matvec, precond, b, *, rtol, max_steps, shadow):
    """:func:`bicgstab`'s steps."""
    x = np.zeros_like(b)
    r = b.copy()
    goal = rtol * np.sqrt(_dot(b, b))
    if np.sqrt(_dot(r, r)) <= goal:
        return x
    r_hat = r.copy() if shadow is None else np.asarray(shadow, dtype=float)
    rho_prev = alpha = omega = 1.0
    p = np.zeros_like(b)
    v = np.zeros_like(b)
    for _ in range(max_steps):
        rho = _dot(r_hat, r)
        if rho == 0.0 or not np.isfinite(rho):
            return None
        p = r + (rho / rho_prev) * (alpha / omega) * (p - omega * v)
        p_hat = precond(p)
        v = matvec(p_hat)
        denom = _dot(r_hat, v)
        if denom == 0.0 or not np.isfinite(denom):
            return None
        alpha = rho / denom
        s = r - alpha * v
        if np.sqrt(_dot(s, s)) <= goal:
            return x + alpha * p_hat
        s_hat = precond(s)
        t = matvec(s_hat)
        tt = _dot(t, t)
        omega = _dot(t, s) / tt if tt > 0 else 0.0
        if omega == 0.0 or not np.isfinite(omega):
            return None
        x = x + alpha * p_hat + omega * s_hat
        r = s - omega * t
        if np.sqrt(_dot(r, r)) <= goal:
            return x
        rho_prev = rho
    return None


def _iterative_solve(A: sp.csc_matrix, pivot: int, sweep_order: np.ndarray) -> np.ndarray | None:
    """Fix ``pi[pivot] = 1``, solve the rest by :func:`bicgstab` preconditioned with a forward
    Gauss–Seidel sweep in ``sweep_order`` (the lower triangle of the deflated system in that
    order, factored by SuperLU without fill), normalize. None when BiCGSTAB does not converge."""
    n = A.shape[0]
    order = sweep_order[sweep_order != pivot]
    M = A[order][:, order].tocsr()
    rhs = -A[order, pivot].toarray().ravel()
    try:
        sweep = spla.splu(sp.tril(M, format="csc"), permc_spec="NATURAL", diag_pivot_thresh=0.0)
    except RuntimeError:
        return None
    x = bicgstab(M.dot, sweep.solve, rhs, rtol=ITERATIVE_RTOL, max_steps=ITERATIVE_MAX_STEPS)
    if x is None or not np.all(np.isfinite(x)):
        # a breakdown on the default shadow residual (a pivot with one way out gives a one-entry
        # ``b``): once more with a fixed pseudo-random shadow, the usual remedy (r̂ = 1 converges
        # to a wrong answer on the stack chains; measured)
        x = bicgstab(M.dot, sweep.solve, rhs, rtol=ITERATIVE_RTOL, max_steps=ITERATIVE_MAX_STEPS,
                     shadow=np.random.default_rng(0).random(rhs.size))
    if x is None or not np.all(np.isfinite(x)):
        return None
    pi = np.empty(n)
    pi[pivot] = 1.0
    pi[order] = x
    pi = np.where(pi < 0, 0.0, pi)  # round-off below zero
    return pi / pi.sum()


def off_diagonal(Q: sp.csr_matrix) -> sp.csr_matrix:
    """``Q`` without its diagonal (stored zeros dropped, column indices sorted): the same matrix,
    entries in the same order, as ``Q.tolil(); setdiag(0); tocsr(); eliminate_zeros()``,
    without the per-entry Python loop of ``lil`` (0.5 s at 50 000 states)."""
    Q = Q.tocsr()
    if not Q.has_sorted_indices:
        Q = Q.sorted_indices()
    rows = np.repeat(np.arange(Q.shape[0]), np.diff(Q.indptr))
    keep = (Q.indices != rows) & (Q.data != 0)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=Q.shape[0]))])
    return sp.csr_matrix((Q.data[keep], Q.indices[keep], indptr), shape=Q.shape)


def stationary(Q: sp.csr_matrix, *, pivot: int = 0, order: np.ndarray | None = None,
               sweep_order: np.ndarray | None = None, tol: float = 1e-10,
               method: str = "auto") -> tuple[np.ndarray, float]:
    """Stationary vector of an irreducible row-stochastic sparse matrix and its residual
    ``||pi Q - pi||_1`` (computed without the self-loops).

    ``method``: ``"direct"`` (SuperLU in ``order``), ``"iterative"`` (BiCGSTAB preconditioned by a
    Gauss–Seidel sweep in ``sweep_order``, kept if its residual is at most
    :data:`ITERATIVE_RESIDUAL_TOL`, else the direct solve) or ``"auto"`` (iterative first when a
    ``sweep_order`` is given and the chain has at least :data:`ITERATIVE_MIN_STATES` states).

    The pivot (the state whose equation is dropped and whose probability is fixed) should
    carry much mass: fixing a nearly-empty state makes the system ill-conditioned (at tiny
    loss rates the mass sits on application-limited states). :func:`solve_chain` pivots on
    the application-limited start state, to which the chain returns after every loss; if the
    residual still exceeds ``tol`` we re-solve pivoting on the heaviest state and keep the
    better of the two.
    """
    if method not in ("auto", "direct", "iterative"):
        raise ValueError(f"method: {method!r} is not one of auto, direct, iterative")
    n = Q.shape[0]
    if n == 1:
        return np.ones(1), 0.0
    # The generator with its diagonal taken as minus the off-diagonal row sums, not 1 - q_ss:
    # at small loss rates q_ss = 1 - p and 1 - q_ss would cancel (Grassmann, Taksar, Heyman).
    off = off_diagonal(Q)
    out = np.asarray(off.sum(axis=1)).ravel()
    A = (sp.diags(out) - off).T.tocsc()

    def residual(v):
        return float(np.abs(off.T @ v - v * out).sum())

    iterate = method == "iterative" or (method == "auto" and sweep_order is not None and n >= ITERATIVE_MIN_STATES)
    if iterate:
        sweep = np.arange(n) if sweep_order is None else np.asarray(sweep_order, dtype=np.int64)
        pi = _iterative_solve(A, pivot, sweep)
        if pi is not None:
            res = residual(pi)
            if res <= ITERATIVE_RESIDUAL_TOL:
                return pi, res
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


def loss_order(w: np.ndarray, B: np.ndarray, l: np.ndarray) -> np.ndarray:
    """An order of states ``(w, B, l)`` in which every transition without a loss goes forward
    (or stays): the timeout states first (stage, then backlog ascending: a back-off moves to the
    next stage with more backlog, the last stage stays), then by window ascending, within a
    window fast recovery (l = 1) before l = 0 and the backlog descending. A loss-free round
    grows the window (slow start or +1), keeps it at the bound ``W`` with the backlog drained by
    ``W·MSS/a − r >= 0`` packets, or leaves an application-limited state where it is; fast
    recovery moves to l = 0 at the same window; a timeout's round goes to w = 1 (Brosh et al.
    Table 6). Only losses (fast retransmit, timeout) go backward.

    The order of :func:`stationary`'s Gauss–Seidel preconditioner; positions of the states as
    given (an ``argsort``-style permutation)."""
    w = np.asarray(w, dtype=np.int64)
    B = np.asarray(B, dtype=np.int64)
    l = np.asarray(l, dtype=np.int64)
    to = w == 0
    return np.lexsort((np.where(to, B, -B), np.where(to, l, -l), w))


def stack_loss_order(w, B, l, k: float, r: float) -> np.ndarray:
    """:func:`loss_order` for the ``linux``/``classic`` chains (:mod:`.stack_chain`), whose
    loss-free rounds may keep the window (CUBIC's fractional growth): within a window the
    backlog then moves one way only — up where the window carries less than the source writes
    (``w·MSS/a < r``), down elsewhere — so it is sorted ascending there and descending here."""
    w = np.asarray(w, dtype=np.int64)
    B = np.asarray(B, dtype=np.int64)
    l = np.asarray(l, dtype=np.int64)
    to = w == 0
    rising = w * k < r - 1e-9
    return np.lexsort((np.where(to, B, np.where(rising, B, -B)), np.where(to, l, -l), w))


def solve_chain(chain: Chain, *, method: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(pi over all states of ``chain.space``, indices of the recurrent class); ``method`` as
    in :func:`stationary`."""
    rc = recurrent_class(chain.Q, start_state(chain))
    sub = chain.Q[rc][:, rc]
    # Pivot on the application-limited state of smallest window in the class (the start state
    # may be transient: the window can pass w0 while still backlogged).
    w, B, l = chain.space.decode(rc)
    al = np.flatnonzero((B == 0) & (l == 0) & (w >= chain.params.r - 1e-9))
    pivot = int(al[np.argmin(w[al])]) if al.size else 0
    order = np.lexsort((w, l, B))  # backlog-major
    if chain.params.stack == "paper":
        sweep = loss_order(w, B, l)
    else:
        sweep = stack_loss_order(w, B, l, chain.params.packets_per_segment, chain.params.r)
    pi_rc, residual = stationary(sub, pivot=pivot, order=order, sweep_order=sweep, method=method)
    pi = np.zeros(chain.space.n)
    pi[rc] = pi_rc
    chain.residual = residual
    return pi, rc
