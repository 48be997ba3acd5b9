// The ns-3 backend's network built in plain C++ (no Python), for benchmarks/ns3_backend.py:
// the same parts (src/tcpdelay/sim/cpp/tcpdelay_sim.h), settings and topology as
// src/tcpdelay/sim/ns3_runtime.py builds for the scenario
//   one VoIP flow over TCP (174-byte packets every 20 ms) + N bulk TCP flows (request/response,
//   until the end), Reno, a RATE b/s bottleneck with a 100-packet queue, RTT 100 ms, DURATION s,
//   TCP state sampled every 10 ms, the queue every 10 ms.
// Usage: dumbbell N_BULK RATE_BPS DURATION_S  -> prints "events <n> wall_s <s>"
#include "tcpdelay_sim.h"

#include <chrono>
#include <iostream>

using namespace ns3;
using namespace tcpdelay_sim;

static Ptr<Socket> TcpSocketOn(Ptr<Node> n) {   // the hosts' settings, as the backend makes them
    SocketMaker m;
    m.node = n;
    return m.Make();
}

int main(int argc, char** argv) {
    int n_bulk = argc > 1 ? std::atoi(argv[1]) : 25;
    double rate = argc > 2 ? std::atof(argv[2]) : 30e6;
    double duration = argc > 3 ? std::atof(argv[3]) : 300.0;
    const double t0 = 2.0, period = 0.01, drain = 5.0;
    auto wall0 = std::chrono::steady_clock::now();

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(1);
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(Seconds(0.04)));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(0.2)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(Seconds(0.2)));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));

    NodeContainer routers; routers.Create(2);
    NodeContainer hosts; hosts.Create(2);            // ltx0 (left), rrx (right)
    InternetStackHelper stack; stack.Install(routers); stack.Install(hosts);
    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", StringValue("10Gbps"));
    access.SetChannelAttribute("Delay", StringValue("0s"));
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1000000p"));
    Ipv4AddressHelper address;
    Ipv4Address ip[2];
    for (int i = 0; i < 2; i++) {
        NetDeviceContainer d = access.Install(hosts.Get(i), routers.Get(i));
        address.SetBase(Ipv4Address(i == 0 ? "10.1.0.0" : "10.2.1.0"), "255.255.255.0");
        ip[i] = address.Assign(d).GetAddress(0);
        RemoveQdiscs(d);
    }
    Trunk trunk = ConnectEmulated(routers.Get(0), routers.Get(1), "1000Gbps");
    address.SetBase("10.0.0.0", "255.255.255.252");
    address.Assign(trunk.devices);
    RemoveQdiscs(trunk.devices);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    EmulatedChannel* ch = PeekPointer(trunk.channel);
    for (int i = 0; i < 2; i++) {
        ch->dir[i].delay_ns = 50000000;
        ch->dir[i].queue_kind = 1;
        ch->dir[i].queue_limit = 100;
        ch->dir[i].loss_rng = NewUniform(3 * i + 1);
        ch->dir[i].jitter_rng = NewUniform(3 * i + 2);
    }
    ch->dir[0].rate_bps = (uint64_t)rate;
    for (int i = 0; i < 2; i++)
        TcpL4(hosts.Get(i))->SetAttribute("SocketType", TypeIdValue(TypeId::LookupByName("ns3::TcpLinuxReno")));
    stack.AssignStreams(hosts, 1000);
    stack.AssignStreams(routers, 2000);

    // VoIP: 174-byte packets every 20 ms from t0
    Ptr<Ledger> ledger = CreateObject<Ledger>();
    Ptr<Socket> listener = TcpSocketOn(hosts.Get(1));
    listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), 20000));
    Ptr<MediaReceiver> rx = CreateObject<MediaReceiver>();
    size_t n = (size_t)std::ceil(duration / 0.02);
    rx->n_packets = n; rx->base_port = 10000; rx->ledger = ledger;
    rx->Setup(listener);
    hosts.Get(1)->AddApplication(rx);
    Ptr<MediaSender> tx = CreateObject<MediaSender>();
    tx->first_s = t0; tx->base_port = 10000; tx->ledger = ledger;
    for (size_t i = 0; i < n; i++) { tx->times_s.push_back(0.02 * i); tx->sizes.push_back(174); tx->pieces.push_back(1); tx->wire.push_back(176); }
    Ptr<Socket> ts = TcpSocketOn(hosts.Get(0));
    tx->AddConnection(ts);
    tx->peer = InetSocketAddress(ip[1], 20000);
    hosts.Get(0)->AddApplication(tx);
    tx->SetStopTime(Seconds(t0 + duration + drain));
    Ptr<TcpStateProbe> probe = CreateObject<TcpStateProbe>();
    probe->flow_id = 0;
    AttachProbeAt(probe, ts, period, t0);

    // bulk: request/response until the end, one server per flow
    std::vector<SocketMaker*> makers;
    for (int k = 0; k < n_bulk; k++) {
        uint16_t port = 30000 + 1 + k;
        Ptr<Socket> l = TcpSocketOn(hosts.Get(0));
        l->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
        Ptr<ResponseServer> server = CreateObject<ResponseServer>();
        Response r; r.kind = 3; server->responses.push_back(r);
        server->stop_s = t0 + duration; server->gaps = NewExponential(0.05, 1000 + k);
        server->flow_id = 1 + k; server->probe_period_s = period;
        server->Setup(l);
        hosts.Get(0)->AddApplication(server);
        SocketMaker* m = new SocketMaker(); m->node = hosts.Get(1); makers.push_back(m);
        Ptr<FetchClient> client = CreateObject<FetchClient>();
        client->server = InetSocketAddress(ip[0], port);
        client->starts.push_back(t0);
        UseSocketMaker(client, m);
        hosts.Get(1)->AddApplication(client);
    }
    ch->StartSampling(period);
    Simulator::Stop(Seconds(t0 + duration + drain));
    Simulator::Run();
    uint64_t events = Simulator::GetEventCount();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    size_t got = 0;
    for (double v : rx->recv_time_s) got += !std::isnan(v);
    std::cout << "events " << events << " wall_s " << wall << " received " << got << " of " << n << std::endl;
    Simulator::Destroy();
    for (auto* m : makers) delete m;
    return 0;
}
