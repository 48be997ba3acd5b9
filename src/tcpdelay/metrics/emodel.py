"""VoIP call quality by the ITU-T G.107 E-model (*The E-model: a computational model for use in
transmission planning*, ITU-T Rec. G.107, 06/2015), with the codec values of ITU-T G.113
Appendix I.

The transmission rating (G.107 §7.1) is ``R = Ro - Is - Id - Ie,eff + A`` with

- ``Ro`` basic signal-to-noise ratio and ``Is`` simultaneous impairments (§7.2, §7.3), from the
  loudness, noise and sidetone parameters (all at their G.107 Table 3 defaults unless given);
- ``Id`` delay impairments (§7.4): talker echo ``Idte`` (mean one-way delay of the echo path
  ``T``), listener echo ``Idle`` (round trip ``Tr``) and too-long absolute delay ``Idd``
  (``Ta``; with the delay-sensitivity parameters ``mT = 100 ms``, ``sT = 1`` of the default
  class, which give the classic ``Idd = 25{(1+X^6)^(1/6) - 3(1+(X/3)^6)^(1/6) + 2}``,
  ``X = log2(Ta/100)``, and ``Idd = 0`` for ``Ta <= 100 ms``);
- ``Ie,eff = Ie + (95 - Ie) * Ppl / (Ppl/BurstR + Bpl)`` (§7.5) the effective equipment
  impairment, from the codec's ``Ie`` and packet-loss robustness ``Bpl``, the packet-loss
  probability ``Ppl`` in percent and the burst ratio ``BurstR``;
- ``A`` the advantage factor (0).

MOS from R by G.107 Annex B: ``MOS = 1`` for ``R < 0``, ``4.5`` for ``R > 100``, else
``1 + 0.035 R + R (R - 60)(100 - R) 7e-6``. With every default R = 93.2 and MOS = 4.41.

For a VoIP flow (:func:`voip_quality`): the mouth-to-ear delay is the packetization time plus
the playout delay (the receiver plays each packet ``playout_delay_s`` after it was sent), used
as ``T = Ta`` and ``Tr = 2 Ta`` (echo cancelled to the default TELR 65 dB); the effective loss is
the packets lost in the network, skipped by the sender or late for that playout delay; BurstR is
measured on that loss pattern.

Codec values (G.113 Appendix I, provisional planning values; *check against the edition you
cite*): G.711 ``Ie = 0``; ``Bpl = 4.3`` without packet-loss concealment (random loss) and
``Bpl = 25.1`` with the PLC of G.711 Appendix I.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError


@dataclass(frozen=True)
class Codec:
    name: str
    ie: float
    bpl: float


CODECS = {
    "g711": Codec("G.711 without PLC", ie=0.0, bpl=4.3),
    "g711-plc": Codec("G.711 with PLC (G.711 Appendix I)", ie=0.0, bpl=25.1),
}

#: G.107 Table 3 default values.
DEFAULTS = dict(SLR=8.0, RLR=2.0, STMR=15.0, LSTR=18.0, Ds=3.0, Dr=3.0, TELR=65.0, WEPL=110.0,
                T=0.0, Tr=0.0, Ta=0.0, qdu=1.0, Ie=0.0, Bpl=4.3, Ppl=0.0, BurstR=1.0,
                Nc=-70.0, Nfor=-64.0, Ps=35.0, Pr=35.0, A=0.0, mT=100.0, sT=1.0)


def _lg(x):
    return np.log10(x)


def ro_is(*, SLR=8.0, RLR=2.0, STMR=15.0, LSTR=18.0, Ds=3.0, TELR=65.0, T=0.0, qdu=1.0,
          Nc=-70.0, Nfor=-64.0, Ps=35.0, Pr=35.0) -> tuple[float, float, float]:
    """``(Ro, Is, No)`` of G.107 §7.2–7.3."""
    OLR = SLR + RLR
    Nos = Ps - SLR - Ds - 100 + 0.004 * (Ps - OLR - Ds - 14) ** 2
    Pre = Pr + 10 * _lg(1 + 10 ** ((10 - LSTR) / 10))
    Nor = RLR - 121 + Pre + 0.008 * (Pre - 35) ** 2
    Nfo = Nfor + RLR
    No = 10 * _lg(10 ** (Nc / 10) + 10 ** (Nos / 10) + 10 ** (Nor / 10) + 10 ** (Nfo / 10))
    Ro = 15 - 1.5 * (SLR + No)
    Xolr = OLR + 0.2 * (64 + No - RLR)
    Iolr = 20 * ((1 + (Xolr / 8) ** 8) ** (1 / 8) - Xolr / 8)
    Ist = sidetone_impairment(STMR, TELR, T)
    Q = 37 - 15 * _lg(qdu)
    G = 1.07 + 0.258 * Q + 0.0602 * Q ** 2
    Z = 46 / 30 - G / 40
    Y = (Ro - 100) / 15 + 46 / 8.4 - G / 9
    Iq = 15 * _lg(1 + 10 ** Y + 10 ** Z)
    return float(Ro), float(Iolr + Ist + Iq), float(No)


def sidetone_impairment(STMR=15.0, TELR=65.0, T=0.0):
    """``Ist`` of G.107 §7.3, from the sidetone masking rating (with the talker echo)."""
    STMRo = -10 * _lg(10 ** (-STMR / 10) + np.exp(-T / 4) * 10 ** (-TELR / 10))
    return (12 * (1 + ((STMRo - 13) / 6) ** 8) ** (1 / 8)
            - 28 * (1 + ((STMRo + 1) / 19.4) ** 35) ** (1 / 35)
            - 13 * (1 + ((STMRo - 3) / 33) ** 13) ** (1 / 13) + 29)


def idd(Ta_ms, mT: float = 100.0, sT: float = 1.0):
    """Impairment of too-long absolute delay ``Ta`` (ms), G.107 §7.4."""
    ta = np.asarray(Ta_ms, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        X = np.log10(np.maximum(ta, 1e-300) / mT) / math.log10(2)
        e = 6 * sT
        val = 25 * ((1 + X ** e) ** (1 / e) - 3 * (1 + (X / 3) ** e) ** (1 / e) + 2)
    return np.where(ta > mT, val, 0.0)


def delay_impairment(T_ms, Ta_ms, Tr_ms, *, Ro: float, No: float, RLR=2.0, TELR=65.0,
                     WEPL=110.0, STMR=15.0, mT=100.0, sT=1.0):
    """``Id = Idte + Idle + Idd`` of G.107 §7.4 (delays in ms). For STMR < 9 dB, TERV is
    replaced by TERVs = TERV + Ist/2."""
    T = np.asarray(T_ms, dtype=float)
    Tr = np.asarray(Tr_ms, dtype=float)
    TERV = TELR - 40 * _lg((1 + T / 10) / (1 + T / 150)) + 6 * np.exp(-0.3 * T ** 2)
    if STMR < 9:
        TERV = TERV + sidetone_impairment(STMR, TELR, T) / 2
    Re = 80 + 2.5 * (TERV - 14)
    Roe = -1.5 * (No - RLR)
    Idte = ((Roe - Re) / 2 + np.sqrt((Roe - Re) ** 2 / 4 + 100) - 1) * (1 - np.exp(-T))
    Rle = 10.5 * (WEPL + 7) * (Tr + 1) ** (-1 / 4)
    Idle = (Ro - Rle) / 2 + np.sqrt((Ro - Rle) ** 2 / 4 + 169)
    return Idte + Idle + idd(Ta_ms, mT, sT)


def ie_eff(ie: float, bpl: float, ppl_percent, burst_r=1.0):
    """Effective equipment impairment, G.107 §7.5 (``Ppl`` in percent)."""
    checks.positive("Bpl", bpl)
    checks.at_least("BurstR", burst_r, 1.0)  # G.107: BurstR = 1 random, > 1 bursty
    p = checks.as_array("Ppl", ppl_percent)
    if np.any((p < 0) | (p > 100)):
        raise ParameterError("Ppl: must be a percentage in [0, 100]")
    return ie + (95 - ie) * p / (p / np.asarray(burst_r, dtype=float) + bpl)


def r_factor(**params) -> float:
    """Transmission rating R of G.107 §7.1; any parameter of :data:`DEFAULTS` may be given
    (delays in ms, Ppl in percent)."""
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise ParameterError(f"E-model: unknown parameter(s) {sorted(unknown)}; allowed: "
                             f"{', '.join(DEFAULTS)}")
    p = {**DEFAULTS, **params}
    Ro, Is, No = ro_is(SLR=p["SLR"], RLR=p["RLR"], STMR=p["STMR"], LSTR=p["LSTR"], Ds=p["Ds"],
                       TELR=p["TELR"], T=p["T"], qdu=p["qdu"], Nc=p["Nc"], Nfor=p["Nfor"],
                       Ps=p["Ps"], Pr=p["Pr"])
    Id = delay_impairment(p["T"], p["Ta"], p["Tr"], Ro=Ro, No=No, RLR=p["RLR"], TELR=p["TELR"],
                          WEPL=p["WEPL"], STMR=p["STMR"], mT=p["mT"], sT=p["sT"])
    Ie = ie_eff(p["Ie"], p["Bpl"], p["Ppl"], p["BurstR"])
    return float(Ro - Is - Id - Ie + p["A"])


def mos_from_r(r):
    """G.107 Annex B: MOS (conversational quality, estimated) from R."""
    r = np.asarray(r, dtype=float)
    mos = 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6
    out = np.where(r < 0, 1.0, np.where(r > 100, 4.5, mos))
    return float(out) if out.ndim == 0 else out


def burst_ratio(loss) -> float:
    """BurstR of a loss pattern (G.107 §7.5): mean observed loss-burst length divided by the
    mean burst length expected for random loss of the same probability, ``1 / (1 - Ppl)``.
    For a 2-state Markov loss process this equals ``1 / (p + q)``. 1 when nothing (or
    everything) is lost; never below 1 (G.107 treats BurstR < 1 as random)."""
    x = np.asarray(loss, bool)
    n = x.size
    k = int(np.count_nonzero(x))
    if n == 0 or k == 0 or k == n:
        return 1.0
    edges = np.diff(np.concatenate([[0], x.astype(np.int8)]))
    bursts = int(np.count_nonzero(edges == 1))
    mean_burst = k / bursts
    return max(1.0, mean_burst * (1 - k / n))


def voip_quality(delay_s, playout_delay_s: float, *, packetization_s: float = 0.020,
                 codec: str = "g711-plc", dropped=None) -> dict:
    """E-model R and MOS of a VoIP flow for a fixed playout delay.

    ``delay_s``: per packet sent, in sequence order, NaN if never received; ``dropped``: packets
    the sender skipped (unusable like lost ones; their delay is NaN anyway). Returns the parts:
    ``mouth_to_ear_s``, ``effective_loss`` (fraction), ``burst_r``, ``ie_eff``, ``id``, ``r``,
    ``mos``.
    """
    if codec not in CODECS:
        raise ParameterError(f"codec: {codec!r} is not one of {', '.join(CODECS)}")
    checks.non_negative("playout_delay_s", playout_delay_s)
    checks.non_negative("packetization_s", packetization_s)
    c = CODECS[codec]
    d = np.asarray(delay_s, dtype=float)
    missing = ~np.isfinite(d)
    with np.errstate(invalid="ignore"):
        unusable = missing | (d > playout_delay_s)
    if dropped is not None:
        unusable |= np.asarray(dropped, bool)
    n = d.size
    ppl = 100.0 * np.count_nonzero(unusable) / n if n else 0.0
    br = burst_ratio(unusable)
    ta_ms = (playout_delay_s + packetization_s) * 1e3
    Ro, Is, No = ro_is(T=ta_ms)
    Id = float(delay_impairment(ta_ms, ta_ms, 2 * ta_ms, Ro=Ro, No=No))
    Ie = float(ie_eff(c.ie, c.bpl, ppl, br))
    r = Ro - Is - Id - Ie
    return {"codec": codec, "playout_delay_s": float(playout_delay_s),
            "mouth_to_ear_s": ta_ms / 1e3, "effective_loss": ppl / 100, "burst_r": br,
            "ie_eff": Ie, "id": Id, "r": float(r), "mos": mos_from_r(r)}


def best_playout_delay(delay_s, candidates_s, **kwargs) -> dict:
    """The candidate playout delay with the highest R (the trade-off of loss against delay) and
    its :func:`voip_quality`."""
    cands = np.atleast_1d(checks.non_negative("candidates_s", candidates_s))
    if cands.size == 0:
        raise ParameterError("candidates_s: give at least one playout delay")
    results = [voip_quality(delay_s, float(c), **kwargs) for c in cands]
    return max(results, key=lambda q: q["r"])
