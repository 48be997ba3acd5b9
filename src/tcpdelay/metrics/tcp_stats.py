"""TCP retransmissions and other run facts the sender recorded in ``run.json``.

Watanabe et al. (*Performance Characterization of Streaming Video over TCP Variants*, §V) report
the packets TCP retransmitted next to the picture discards. The count is ``tcpi_total_retrans``
of ``TCP_INFO`` (segments retransmitted over a connection's life) read when the run ends. Two
places are read, summed over a flow's connections:

- ``run.json`` ``"sender"`` section written by ``tcpdelay send`` (:mod:`tcpdelay.transport`):
  ``sender.params.flow_id`` and ``sender.result.tcp_info_end`` (one object per connection with
  ``total_retrans``);
- a top-level ``"tcp_stats"`` list, for runs with several flows in one directory::

      "tcp_stats": [{"flow_id": 0, "connection": 0, "total_retrans": 12, ...}, ...]

UDP flows have none; a flow without an entry has retransmissions ``None`` (unknown, not zero).
"""

from __future__ import annotations

from tcpdelay.errors import ParameterError


def retransmissions_by_flow(meta: dict) -> dict[int, int]:
    """Total TCP retransmissions per flow id, summed over the flow's connections."""
    out: dict[int, int] = {}
    stats = meta.get("tcp_stats")
    if stats is not None:
        if not isinstance(stats, list):
            raise ParameterError("run.json tcp_stats: expected a list of per-connection objects")
        for i, entry in enumerate(stats):
            try:
                fid = int(entry["flow_id"])
                retrans = int(entry["total_retrans"])
            except (KeyError, TypeError, ValueError):
                raise ParameterError(f"run.json tcp_stats[{i}]: needs integer flow_id and "
                                     "total_retrans") from None
            out[fid] = out.get(fid, 0) + retrans
    sender = meta.get("sender")
    if isinstance(sender, dict) and not stats:
        params = sender.get("params") or {}
        infos = (sender.get("result") or {}).get("tcp_info_end") or []
        if isinstance(infos, list) and infos and params.get("transport", "tcp") == "tcp":
            fid = int(params.get("flow_id", 0))
            out[fid] = sum(int(i.get("total_retrans", 0)) for i in infos if isinstance(i, dict))
    return out


def run_duration_s(meta: dict) -> float | None:
    """The run's media duration: top-level ``duration_s`` or ``sender.params.duration_s``."""
    d = meta.get("duration_s")
    if d is None and isinstance(meta.get("sender"), dict):
        d = (meta["sender"].get("params") or {}).get("duration_s")
    try:
        return float(d) if d is not None and float(d) > 0 else None
    except (TypeError, ValueError):
        return None
