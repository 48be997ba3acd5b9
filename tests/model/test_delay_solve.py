"""The fast paths of the delay model (issue 16: ``tcpdelay advise`` with correlated loss in < 2 s)
against their references: the chain built breadth-first from the start state against the full
build, the iterative stationary solve (BiCGSTAB with a Gauss–Seidel sweep in the loss order)
against the direct SuperLU solve, its fallback, and the pieces they rest on."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from tcpdelay.model.delay import DelayParams
from tcpdelay.model.delay import chain as chain_mod
from tcpdelay.model.delay import solve as solve_mod
from tcpdelay.model.delay.chain import build_chain, reachable_edges, start_index
from tcpdelay.model.delay.distribution import chain_statistics, packet_distribution
from tcpdelay.model.delay.solve import (
    ITERATIVE_RESIDUAL_TOL, bicgstab, loss_order, off_diagonal, recurrent_class, solve_chain, start_state,
    stationary)

# (rate_pps, packet_bytes, rtt_s, loss, options): small chains of both loss models and the choices
CASES = [
    (50, 1448, 0.3, 0.005, {"loss_model": "correlated", "backlog_bound_packets": 200}),   # video, advise's case
    (100, 724, 0.3, 0.005, {"loss_model": "correlated", "backlog_bound_packets": 200}),   # its split-2
    (50, 1448, 0.3, 0.005, {"backlog_bound_packets": 200}),
    (50, 174, 0.1, 0.02, {}),                                                              # voip
    (50, 174, 0.1, 0.02, {"loss_model": "correlated", "queue": "bytes", "limited_transmit": False}),
    (33.3, 724, 0.3, 0.01, {"growth_requires_backlog": True, "backlog_rounding": "floor"}),
    (50, 174, 0.3, 0.01, {"hol_ramp": True, "al_fr_backlog": "eq4", "backlog_rounding": "nearest"}),
    (50, 1448, 0.1, 1e-7, {}),                                                             # nearly loss-free
]


def _chain(case):
    f, a, rtt, p, opts = case
    return build_chain(DelayParams(rate_pps=f, packet_bytes=a, rtt_s=rtt, loss=p, **opts))


@pytest.mark.parametrize("case", CASES)
def test_off_diagonal_is_the_lil_construction_bit_for_bit(case):
    chain = _chain(case)
    sub = chain.Q[recurrent_class(chain.Q, start_state(chain))]
    for Q in (chain.Q, sub[:, recurrent_class(chain.Q, start_state(chain))]):
        ref = Q.tolil()
        ref.setdiag(0.0)
        ref = ref.tocsr()
        ref.eliminate_zeros()
        got = off_diagonal(Q)
        assert np.array_equal(got.indptr, ref.indptr) and np.array_equal(got.indices, ref.indices)
        assert np.array_equal(got.data, ref.data)
        assert np.array_equal(np.asarray(got.sum(axis=1)).ravel(), np.asarray(ref.sum(axis=1)).ravel())


@pytest.mark.parametrize("case", CASES)
def test_every_loss_free_transition_goes_forward_in_the_loss_order(case):
    """What makes one Gauss–Seidel sweep carry the mass along whole loss-free paths: only loss
    events (fast retransmit, timeout) go backward in :func:`loss_order`."""
    chain = _chain(case)
    space, e = chain.space, chain.edges
    w, B, l = space.decode(np.arange(space.n))
    pos = np.empty(space.n, dtype=np.int64)
    pos[loss_order(w, B, l)] = np.arange(space.n)
    Q = chain.Q.tocoo()
    back = pos[Q.col] < pos[Q.row]
    # every backward entry of Q is reached by a loss edge of its source
    loss_targets = set()
    real = chain.packet_edge & (e.is_loss > 0)
    for s, w2, l2, Bf in zip(e.src[real], e.w2[real], e.l2[real], e.Bf[real]):
        for b in {int(np.floor(Bf + 1e-9)), int(np.floor(Bf + 1e-9)) + 1, int(np.floor(Bf + 0.5))}:
            loss_targets.add((int(s), int(space.index(w2, min(b, space.Bm), l2))))
    assert back.any()
    assert all((int(r), int(c)) in loss_targets for r, c in zip(Q.row[back], Q.col[back]))


@pytest.mark.parametrize("case", CASES)
def test_iterative_solution_equals_the_direct_one_within_its_tolerance(case):
    """The fast path against the reference SuperLU solve: residual at most 1e-14, the stationary
    vectors within 1e-12 in L1, the packet delay distribution's pmf within 1e-12 at every delay,
    and the chain statistics within 1e-9 relative.

    The supports may differ by delays of round-off mass only (< 1e-15; seen: 1.5e-19 at the top
    three delays of the first case with the direct solve, none with the iterative one): the
    packet distribution sums runs of delays by a cumulative sum of differences, whose
    cancellation leaves such residues where the exact mass is 0, whichever solver ran."""
    chain = _chain(case)
    pi_d, rc_d = solve_chain(chain, method="direct")
    res_d = chain.residual
    pi_i, rc_i = solve_chain(chain, method="iterative")
    assert np.array_equal(rc_d, rc_i)
    assert chain.residual <= max(ITERATIVE_RESIDUAL_TOL, res_d)
    assert np.abs(pi_i - pi_d).sum() <= 1e-12
    s_d, m_d, sh_d = packet_distribution(chain, pi_d)
    s_i, m_i, sh_i = packet_distribution(chain, pi_i)
    mass_d, mass_i = dict(zip(s_d.tolist(), m_d)), dict(zip(s_i.tolist(), m_i))
    for x in set(mass_d) | set(mass_i):
        assert abs(mass_d.get(x, 0.0) - mass_i.get(x, 0.0)) <= 1e-12, x
        if x not in mass_d or x not in mass_i:
            assert max(mass_d.get(x, 0.0), mass_i.get(x, 0.0)) < 1e-15, x
    assert sh_i == pytest.approx(sh_d, rel=1e-9, abs=1e-15)
    st_d, st_i = chain_statistics(chain, pi_d), chain_statistics(chain, pi_i)
    for key in ("mean_window", "mean_backlog_packets", "timeout_probability", "loss_events_per_s"):
        assert st_i[key] == pytest.approx(st_d[key], rel=1e-9, abs=1e-15), key
    assert st_i["truncated_mass"] == pytest.approx(st_d["truncated_mass"], rel=1e-6, abs=1e-14)


def test_the_advise_chain_takes_the_iterative_path_and_agrees_with_the_direct_solve():
    """Video at RTT 300 ms, 0.5 % correlated loss, the bound at 400 packets (20 795 recurrent
    states, one of the solves of ``tcpdelay advise``): ``auto`` solves it iteratively."""
    chain = build_chain(DelayParams(rate_pps=50, packet_bytes=1448, rtt_s=0.3, loss=0.005,
                                    loss_model="correlated", backlog_bound_packets=400))
    pi_a, rc = solve_chain(chain)
    assert rc.size > solve_mod.ITERATIVE_MIN_STATES and chain.residual <= ITERATIVE_RESIDUAL_TOL
    pi_i, _ = solve_chain(chain, method="iterative")
    assert np.array_equal(pi_a, pi_i)
    pi_d, _ = solve_chain(chain, method="direct")
    assert np.abs(pi_a - pi_d).sum() <= 1e-12
    assert pi_a[rc].sum() == pytest.approx(1.0, abs=1e-14)


def test_a_failed_iteration_falls_back_to_the_direct_solve_bit_for_bit(monkeypatch):
    chain = _chain(CASES[0])
    pi_d, _ = solve_chain(chain, method="direct")
    monkeypatch.setattr(solve_mod, "ITERATIVE_MAX_STEPS", 0)
    pi_f, _ = solve_chain(chain, method="iterative")
    assert np.array_equal(pi_f, pi_d)


def test_small_classes_keep_the_direct_solve_bit_for_bit():
    chain = _chain(CASES[3])
    rc = recurrent_class(chain.Q, start_state(chain))
    assert rc.size < solve_mod.ITERATIVE_MIN_STATES
    assert np.array_equal(solve_chain(chain)[0], solve_chain(chain, method="direct")[0])


def test_stationary_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="method"):
        stationary(sp.csr_matrix(np.array([[0.5, 0.5], [0.5, 0.5]])), method="gmres")


def test_bicgstab_solves_a_nonsymmetric_system():
    rng = np.random.default_rng(3)
    n = 60
    A = sp.random(n, n, density=0.1, random_state=rng, format="csr") + sp.eye(n) * 4.0
    x_true = rng.standard_normal(n)
    b = A @ x_true
    jacobi = 1.0 / A.diagonal()
    x = bicgstab(A.dot, lambda v: v * jacobi, b, rtol=1e-13, max_steps=200)
    assert x is not None
    np.testing.assert_allclose(x, np.linalg.solve(A.toarray(), b), rtol=0, atol=1e-10)
    assert bicgstab(A.dot, lambda v: v * jacobi, b, rtol=1e-13, max_steps=1) is None
    assert np.array_equal(bicgstab(A.dot, lambda v: v, np.zeros(n), rtol=1e-13, max_steps=5), np.zeros(n))


@pytest.mark.parametrize("case", CASES)
def test_reachable_build_is_the_full_build_restricted_bit_for_bit(case):
    """``build_chain(reachable_only=True)`` (what ``predict`` uses): the edges of the reachable
    sources in the full build's order, the recurrent class and its rows of Q, the stationary
    vector and the packet delay distribution bit for bit; the loss statistics sum fewer zero
    terms, so they agree to round-off (1e-15 relative)."""
    full = _chain(case)
    reach = build_chain(full.params, reachable_only=True)
    start = start_index(full.params, full.space)
    rc = recurrent_class(full.Q, start)
    assert np.array_equal(recurrent_class(reach.Q, start), rc)
    seen = np.zeros(full.space.n, dtype=bool)
    seen[breadth_first_order(full.Q, start, directed=True, return_predecessors=False)] = True
    e_full, e_reach = full.edges, reach.edges
    keep = seen[e_full.src]
    for key in e_full.__dataclass_fields__:
        assert np.array_equal(getattr(e_full, key)[keep], getattr(e_reach, key)), key
    assert np.array_equal(reachable_edges(full.params, full.space, start).src, e_reach.src)
    sub_f, sub_r = full.Q[rc][:, rc], reach.Q[rc][:, rc]
    for key in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(sub_f, key), getattr(sub_r, key)), key
    pi_f, _ = solve_chain(full)
    pi_r, _ = solve_chain(reach)
    assert np.array_equal(pi_f, pi_r)
    for a, b in zip(packet_distribution(full, pi_f), packet_distribution(reach, pi_r)):
        assert np.array_equal(a, b)
    st_f, st_r = chain_statistics(full, pi_f), chain_statistics(reach, pi_r)
    for key in st_f:
        assert st_r[key] == pytest.approx(st_f[key], rel=1e-15, abs=1e-300), key



def _breadth_first_edges(params, space, start):
    """The reference for :func:`reachable_edges`: its former breadth-first build, one builder
    call per step from ``start`` (what ``predict`` used before the window-batched build)."""
    from tcpdelay.model.delay.chain import _EDGE_DTYPES, Edges, _edge_builder, _rounded_targets

    edges_from = _edge_builder(params, space)
    seen = np.zeros(space.n, dtype=bool)
    seen[start] = True
    frontier = np.array([start], dtype=np.int64)
    found = []
    while frontier.size:
        e, part = edges_from(frontier)
        found.append((e, part))
        dst_lo, dst_hi, frac, _ = _rounded_targets(e, params, space)
        real = e.time_s != 0.0
        targets = np.unique(np.concatenate([dst_lo[real & (e.prob * (1 - frac) > 0)],
                                            dst_hi[real & (e.prob * frac > 0)]]))
        frontier = targets[~seen[targets]]
        seen[frontier] = True
    part = np.concatenate([pt for _, pt in found])
    cat = {key: np.concatenate([getattr(e, key) for e, _ in found]) for key in _EDGE_DTYPES}
    order = np.lexsort((cat["src"], part))
    return Edges(**{key: v[order] for key, v in cat.items()})


# (rate_pps, packet_bytes, rtt_s, loss, options): every stack and loss model, windows reached
# below, across and at the first batch's cap (16), a start window above it (r = 30), and the
# larger backlog bounds predict grows to
WINDOW_BATCH_CASES = [
    (f, a, rtt, p, dict(opts, stack=stack))
    for stack in ("paper", "linux", "classic")
    for (f, a, rtt, p, opts) in [
        (50, 174, 0.1, 0.02, {}),
        (50, 1448, 0.3, 0.005, {}),
        (50, 1448, 0.3, 0.05, {"loss_model": "correlated", "queue": "bytes"}),
        (50, 1448, 0.1, 0.03, {"backlog_bound_packets": 240}),
        (50, 1448, 0.02, 0.1, {}),
        (100, 724, 0.3, 0.01, {"backlog_bound_packets": 400}),
    ]
] + [(50, 174, 0.3, 0.01, {"hol_ramp": True, "al_fr_backlog": "eq4", "backlog_rounding": "nearest"})]


@pytest.mark.parametrize("case", WINDOW_BATCH_CASES)
def test_window_batched_build_is_the_breadth_first_build_bit_for_bit(case):
    """:func:`reachable_edges` builds a small space window by window and keeps the reachable
    states, a large one breadth-first: either way the edges of the former breadth-first build,
    in the same order, with the same values, bit for bit."""
    f, a, rtt, p, opts = case
    params = DelayParams(rate_pps=f, packet_bytes=a, rtt_s=rtt, loss=p, **opts)
    chain = build_chain(params, reachable_only=True)
    start = start_index(params, chain.space)
    ref = _breadth_first_edges(params, chain.space, start)
    for got in (chain.edges, chain_mod._window_batched_edges(params, chain.space, start),
                chain_mod._breadth_first_edges(params, chain.space, start)):
        for key in ref.__dataclass_fields__:
            g, want = getattr(got, key), getattr(ref, key)
            assert g.dtype == want.dtype and g.shape == want.shape and g.tobytes() == want.tobytes(), key
