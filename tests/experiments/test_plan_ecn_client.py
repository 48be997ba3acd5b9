"""ECN for cross traffic is asked for by the host that opens the connection (RFC 3168 §6.1.1): a
bulk download's client, not only its server, so the plan gives the client host of a cross flow
with ``tcp.ecn = 1`` Linux's ``tcp_ecn = 1`` (both backends apply a host's settings to its
sockets). Without it the server's setting alone negotiated nothing and an AQM with ``ecn = true``
dropped the download's packets instead of marking them (docs/experiments/aqm.md)."""

from __future__ import annotations

from tcpdelay.experiments.run import plan_run
from tcpdelay.experiments.scenario import parse_scenario


def _hosts(cross_tcp: dict, flow_tcp: dict | None = None) -> dict[str, dict]:
    data = {"duration_s": 5, "path": {"rtt_s": 0.06, "forward": {"rate_bps": 4e6, "queue_packets": 500,
                                                                  "aqm": {"discipline": "codel", "ecn": True}}},
            "flows": [{"name": "audio", "profile": "audio-16k", "tcp": flow_tcp or {}}],
            "cross": [{"kind": "bulk", "size_bytes": 1_000_000, "tcp": cross_tcp}]}
    plan = plan_run(parse_scenario(data, source="test"), 1)
    by_name = {h["name"]: h for h in plan.hosts}
    return {role: by_name[name]["tcp"] for role, name in (("server", plan.cross[0].server),
                                                          ("client", plan.cross[0].client),
                                                          ("media_receiver", plan.media[0].receiver))}


def test_the_client_of_an_ecn_cross_flow_asks_for_ecn():
    hosts = _hosts({"preset": "linux-default", "ecn": 1})
    assert hosts["server"]["ecn"] == 1 and hosts["client"] == {"ecn": 1}


def test_without_ecn_or_accepting_only_the_client_keeps_the_kernel_default():
    assert _hosts({"preset": "linux-default"})["client"] == {}
    assert _hosts({"preset": "linux-default", "ecn": 2})["client"] == {}
    assert _hosts({"preset": "linux-default", "ecn": 0})["client"] == {}


def test_a_media_flow_asking_for_ecn_changes_its_sender_only():
    # the media sender opens its connection: its own tcp_ecn = 1 asks, the receiver accepts (2)
    hosts = _hosts({"preset": "linux-default"}, flow_tcp={"ecn": 1})
    assert hosts["media_receiver"] == {} and hosts["client"] == {}
