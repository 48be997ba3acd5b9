"""The CBR-over-TCP delay model of Brosh, Baset, Misra, Rubenstein, Schulzrinne, "The
Delay-Friendliness of TCP for Real-Time Traffic" (Section 4, Appendix A).

- :func:`predict` — one call from path parameters to a :class:`DelayPrediction`
- :mod:`.params` (validated parameters and the [choice] options), :mod:`.profiles`,
  :mod:`.chain` (state space, vectorized transitions), :mod:`.solve` (stationary vector),
  :mod:`.distribution` (eq 3 and statistics), :mod:`.montecarlo` (independent walk),
  :mod:`.region` (working regions, §6.1), :mod:`.playout` (playout delay, §6.6),
  :mod:`.heuristics` (split-N and parallel connections compared, §7)
"""

from tcpdelay.model.delay.distribution import DelayPrediction
from tcpdelay.model.delay.params import DelayParams
from tcpdelay.model.delay.predict import mixture, predict, solve_params, tcp_throughput_bps
from tcpdelay.model.delay.profiles import PROFILES, Criterion, Profile, get_profile
from tcpdelay.model.delay.heuristics import compare_heuristics
from tcpdelay.model.delay.playout import late_fraction_curve, playout_advice, recommended_playout_s
from tcpdelay.model.delay.region import working_region

__all__ = [
    "DelayParams", "DelayPrediction", "Criterion", "Profile", "PROFILES", "get_profile",
    "mixture", "predict", "solve_params", "tcp_throughput_bps",
    "compare_heuristics", "late_fraction_curve", "playout_advice", "recommended_playout_s",
    "working_region",
]
