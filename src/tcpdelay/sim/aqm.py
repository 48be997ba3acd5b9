"""The bottleneck's queue discipline in ns-3: a link direction's ``aqm`` table
(:mod:`tcpdelay.link`: CoDel, FQ-CoDel, PIE, each with ``ecn``) mapped onto ns-3 3.44's
traffic-control queue discs, and what does not map (docs/ns3.md, "Queue disciplines").

The emulator keeps a discipline's packets in its own queue in front of its rate shaper
(docs/emulator.md, "Queue disciplines and ECN"). In the simulation the queue disc sits at the
router's device on the emulated link (``TrafficControlHelper``, in place of the default one ns-3
installs), the device serializes at the direction's ``rate_bps`` with a one-packet device queue
(so packets wait in the queue disc, not in the device), and the :class:`EmulatedChannel` keeps
the rest of the direction — loss, delay, jitter — with no rate and no queue of its own.

Plain data in, plain data out: no ns-3 import here, so the plan-time check runs without it.
"""

from __future__ import annotations

#: ns-3's class for each discipline of the link schema.
NS3_QUEUE_DISC = {"codel": "ns3::CoDelQueueDisc", "fq_codel": "ns3::FqCoDelQueueDisc", "pie": "ns3::PieQueueDisc"}

#: A direction without a limit: a queue disc's limit that never fills (ns-3 needs one).
UNLIMITED_PACKETS = 1_000_000

#: What a PointToPointNetDevice adds to each IP packet (PPP), which it serializes too.
PPP_HEADER_BYTES = 2


def discipline(direction: dict) -> str:
    """The direction's discipline name (``drop_tail`` when it has none)."""
    return (direction.get("aqm") or {}).get("discipline", "drop_tail")


def unsupported(direction: dict, *, access: bool = False) -> list[str]:
    """What of a direction's discipline (a link table's direction, plain data) ns-3 cannot run,
    one phrase each (empty: it maps)."""
    name = discipline(direction)
    if name == "drop_tail":
        return []
    if access:
        return [f"aqm {name}: ns-3 runs a queue discipline at the bottleneck only, not on an "
                "access link; run it on the testbed"]
    out = []
    if direction.get("trace_file"):
        out.append(f"aqm {name} with a trace bottleneck: ns-3's device serializes at one rate "
                   "(rate_bps), a Mahimahi trace has none; run it on the testbed")
    if direction.get("outages"):
        out.append(f"aqm {name} with outages: in ns-3 the queue disc keeps sending into the "
                   "link while it is down (the emulator holds the queue); run it on the testbed")
    if name == "fq_codel" and direction.get("queue_bytes") is not None:
        out.append("aqm fq_codel with queue_bytes: ns-3's FqCoDelQueueDisc limits packets only "
                   "(give queue_packets)")
    return out


def approximations(direction: dict) -> list[str]:
    """What ns-3 does differently with this direction's discipline where the difference is
    confined to a case (said once per run, as the hosts' approximations are)."""
    if discipline(direction) == "drop_tail":
        return []
    loss = (direction.get("loss") or {}).get("model", "none")
    if loss != "none":
        return [f"{loss} loss is drawn after ns-3's queue disc (the emulator draws it before its queue): "
                "a packet lost on the link still took its turn in the queue and at the bottleneck"]
    return []


def _seconds(x: float) -> str:
    return f"{round(float(x) * 1e9)}ns"


def _limit(direction: dict) -> str:
    if direction.get("queue_packets") is not None:
        return f"{int(direction['queue_packets'])}p"
    if direction.get("queue_bytes") is not None:
        return f"{int(direction['queue_bytes'])}B"
    return f"{UNLIMITED_PACKETS}p"


def queue_disc(direction: dict, mtu_bytes: int) -> dict | None:
    """The queue disc of a direction: ``{"type", "attributes" (name -> ns-3 string value),
    "quantum_bytes" (FQ-CoDel's, set by method; 0: none), "device_rate_bps"}``, or None for
    drop-tail (the channel's own queue). Call :func:`unsupported` first.

    The mapping (ns-3 3.44 attribute names):

    - every discipline: the limit ``queue_packets``/``queue_bytes`` -> ``MaxSize`` (``Np``/``NB``;
      none: 1,000,000 packets), ``ecn`` -> ``UseEcn``;
    - ``codel``: ``target_s`` -> ``Target``, ``interval_s`` -> ``Interval``; ``MinBytes`` (RFC 8289's
      MAXPACKET) the path MTU;
    - ``fq_codel``: ``flows`` -> ``Flows``, ``quantum_bytes`` -> ``SetQuantum``, ``target_s`` /
      ``interval_s`` -> ``Target`` / ``Interval`` (each flow's CoDel); ``DropBatchSize`` 1 (the
      emulator drops one packet of the fattest flow on overflow; ns-3's default is 64, Linux's too);
    - ``pie``: ``target_s`` -> ``QueueDelayReference``, ``t_update_s`` -> ``Tupdate``,
      ``max_burst_s`` -> ``MaxBurstAllowance``, ``alpha``/``beta`` -> ``A``/``B``; ``MeanPktSize``
      the path MTU (ns-3 stops dropping at two mean packets queued, the emulator at two packets);
      RFC 8033's timestamp delay (``UseDequeueRateEstimator`` false), its cap on the step
      (``UseCapDropAdjustment``) and its 10 % marking bound (``MarkEcnThreshold``) as ns-3's
      defaults have them.

    ``device_rate_bps``: ``rate_bps`` scaled by (MTU + 2) / MTU, so that an MTU-sized packet takes
    what the emulator gives it although the device serializes its 2-byte PPP header too (a
    smaller packet takes up to 2 bytes' time longer); None without a rate (the link's devices'
    own rate: no queue builds, as in the emulator without a bottleneck).
    """
    name = discipline(direction)
    if name == "drop_tail":
        return None
    aqm = direction["aqm"]
    attrs = {"MaxSize": _limit(direction), "UseEcn": "true" if aqm.get("ecn") else "false"}
    quantum = 0
    if name == "codel":
        attrs.update(Target=_seconds(aqm.get("target_s", 0.005)), Interval=_seconds(aqm.get("interval_s", 0.1)),
                     MinBytes=str(int(mtu_bytes)))
    elif name == "fq_codel":
        attrs.update(Target=_seconds(aqm.get("target_s", 0.005)), Interval=_seconds(aqm.get("interval_s", 0.1)),
                     Flows=str(int(aqm.get("flows", 1024))), DropBatchSize="1")
        quantum = int(aqm.get("quantum_bytes", 1514))
    else:
        attrs.update(QueueDelayReference=_seconds(aqm.get("target_s", 0.015)),
                     Tupdate=_seconds(aqm.get("t_update_s", 0.015)),
                     MaxBurstAllowance=_seconds(aqm.get("max_burst_s", 0.15)),
                     A=repr(float(aqm.get("alpha", 0.125))), B=repr(float(aqm.get("beta", 1.25))),
                     MeanPktSize=str(int(mtu_bytes)))
    rate = direction.get("rate_bps")
    device_rate = None if not rate else float(rate) * (mtu_bytes + PPP_HEADER_BYTES) / mtu_bytes
    return {"type": NS3_QUEUE_DISC[name], "discipline": name, "attributes": attrs, "quantum_bytes": quantum,
            "device_rate_bps": device_rate}
