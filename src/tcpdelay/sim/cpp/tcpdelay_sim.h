// tcpdelay's parts inside an ns-3 simulation, compiled once per worker by cppyy
// (src/tcpdelay/sim/ns3_runtime.py). Nothing here runs Python per packet.
//
// * EmulatedChannel: the bottleneck link, the Rust emulator's model per direction
//   (emulator/src/link.rs `Link::admit`): outage -> loss (Bernoulli or Gilbert-Elliott) ->
//   drop-tail queue (packets or bytes; the packet in service not counted) -> bottleneck (a bit
//   rate with the remainder carried, or a looping Mahimahi trace) -> delay (+ uniform jitter,
//   order kept unless reorder). Sizes are IP packet sizes, as the emulator's TUN sees them.
// * MediaSender / MediaReceiver: a media flow's packets at their times over TCP (each framed
//   by its RFC 4571 length, 2 bytes) or UDP (one datagram each), the application queue written
//   as far as the socket takes it; the receiver notes when each packet's last byte was read.
// * ResponseServer / FetchClient: TCP cross traffic as request/response, as the testbed's.
// * SocketMaker: a TCP socket with a host's settings (the one place they are applied).
// * TcpStateProbe: a TCP socket's state every period (the columns of tcp_state records).
#pragma once

#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/internet-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <vector>

namespace tcpdelay_sim {

using namespace ns3;

constexpr uint32_t kOpportunityBytes = 1500;  // one Mahimahi delivery opportunity
constexpr uint32_t kPppHeaderBytes = 2;       // what a PointToPointNetDevice adds to an IP packet

// ------------------------------------------------------------------------------------------
// The link: one direction (emulator/src/{outage,loss,queue,rate,trace,delay}.rs).

struct Direction {
    // -- configuration (set from Python before the run) --
    uint64_t delay_ns = 0;
    uint64_t jitter_ns = 0;
    bool reorder = false;
    int loss_model = 0;  // 0 none, 1 Bernoulli(p), 2 Gilbert-Elliott(p, r, k, h)
    double p = 0, r = 0, k = 1, h = 0;
    uint64_t rate_bps = 0;             // 0 and no trace: unlimited
    std::vector<uint64_t> trace_ms;    // Mahimahi opportunities (ms); empty: no trace
    int queue_kind = 0;                // 0 unlimited, 1 packets, 2 bytes
    uint64_t queue_limit = 0;
    std::vector<uint64_t> outage_start_ns, outage_end_ns;  // sorted, non-overlapping

    // -- state --
    Ptr<UniformRandomVariable> loss_rng, jitter_rng;
    bool ge_bad = false;
    uint64_t free_at_ns = 0, rem = 0;                       // rate shaper
    size_t t_idx = 0;                                       // trace shaper
    uint64_t t_base_ms = 0;
    uint32_t t_left = kOpportunityBytes;
    std::deque<std::pair<uint64_t, uint32_t>> waiting;      // (service start, size)
    uint64_t q_bytes = 0, peak_packets = 0, peak_bytes = 0;
    uint64_t last_due_ns = 0;

    // -- counters --
    uint64_t packets_in = 0, bytes_in = 0, delivered = 0, delivered_bytes = 0;
    uint64_t drop_loss = 0, drop_queue = 0, drop_outage = 0;

    // -- queue length over time (sampled every period) --
    std::vector<double> qs_time_s;
    std::vector<uint32_t> qs_packets;
    std::vector<uint64_t> qs_bytes;

    // -- a queue discipline at the sending device instead of the queue above (InstallQdisc):
    //    its length, peak and every dequeued packet's sojourn come from the queue disc --
    Ptr<QueueDisc> qdisc;
    std::vector<double> sojourn_s;
    void OnSojourn(Time v) { sojourn_s.push_back(v.GetSeconds()); }
    void OnQdiscPackets(uint32_t, uint32_t v) { peak_packets = std::max<uint64_t>(peak_packets, v); }
    void OnQdiscBytes(uint32_t, uint32_t v) { peak_bytes = std::max<uint64_t>(peak_bytes, v); }

    bool Chance(double prob) { return prob >= 1.0 || (prob > 0.0 && loss_rng->GetValue() < prob); }

    // The end of the outage containing t, or 0 when the link is up at t.
    uint64_t DownUntil(uint64_t t) const {
        auto it = std::upper_bound(outage_start_ns.begin(), outage_start_ns.end(), t);
        if (it == outage_start_ns.begin()) return 0;
        size_t i = (it - outage_start_ns.begin()) - 1;
        return t < outage_end_ns[i] ? outage_end_ns[i] : 0;
    }
    uint64_t NextUp(uint64_t t) const {
        for (uint64_t end; (end = DownUntil(t)) != 0;) t = end;
        return t;
    }
    bool Lose() {
        if (loss_model == 1) return Chance(p);
        if (loss_model == 2) {
            bool lost = ge_bad ? !Chance(h) : !Chance(k);
            if (ge_bad) { if (Chance(r)) ge_bad = false; }
            else if (Chance(p)) ge_bad = true;
            return lost;
        }
        return false;
    }
    void Advance(uint64_t now) {
        while (!waiting.empty() && waiting.front().first <= now) {
            q_bytes -= waiting.front().second;
            waiting.pop_front();
        }
    }
    bool Fits(uint32_t size) const {
        if (queue_kind == 1) return waiting.size() < queue_limit;
        if (queue_kind == 2) return q_bytes + size <= queue_limit;
        return true;
    }
    void Push(uint64_t start, uint32_t size) {
        waiting.emplace_back(start, size);
        q_bytes += size;
        peak_packets = std::max<uint64_t>(peak_packets, waiting.size());
        peak_bytes = std::max(peak_bytes, q_bytes);
    }
    // rate.rs RateShaper::serve
    std::pair<uint64_t, uint64_t> ServeRate(uint64_t ready, uint32_t size) {
        uint64_t start = std::max(ready, free_at_ns);
        if (start > free_at_ns) rem = 0;
        uint64_t up = NextUp(start);
        if (up != start) { start = up; rem = 0; }
        unsigned __int128 num = (unsigned __int128)size * 8u * 1000000000u + rem;
        uint64_t tx = (uint64_t)(num / rate_bps);
        rem = (uint64_t)(num % rate_bps);
        free_at_ns = start + tx;
        return {start, free_at_ns};
    }
    // trace.rs TraceShaper
    uint64_t TraceNow() const { return (t_base_ms + trace_ms[t_idx]) * 1000000ull; }
    void TraceStep() {
        if (++t_idx == trace_ms.size()) { t_idx = 0; t_base_ms += trace_ms.back(); }
        t_left = kOpportunityBytes;
    }
    void TraceSeek(uint64_t t) {
        uint64_t period_ns = trace_ms.back() * 1000000ull;
        for (;;) {
            uint64_t cur = TraceNow();
            if (cur + period_ns < t) t_base_ms += ((t - cur) / period_ns - 1) * trace_ms.back();
            while (t_left == 0 || TraceNow() < t) TraceStep();
            uint64_t end = DownUntil(TraceNow());
            if (end == 0) return;
            t = end;
        }
    }
    std::pair<uint64_t, uint64_t> ServeTrace(uint64_t ready, uint32_t size) {
        TraceSeek(ready);
        uint64_t start = TraceNow();
        uint32_t remaining = std::max<uint32_t>(size, 1);
        for (;;) {
            uint32_t take = std::min(remaining, t_left);
            t_left -= take;
            remaining -= take;
            if (remaining == 0) break;
            TraceSeek(TraceNow());
        }
        return {start, TraceNow()};
    }
    uint64_t Due(uint64_t sent) {
        uint64_t d = delay_ns;
        if (jitter_ns > 0) {
            double u = jitter_rng->GetValue() * 2.0 - 1.0;
            int64_t j = (int64_t)(u * (double)jitter_ns);
            d = (uint64_t)std::max<int64_t>((int64_t)d + j, 0);
        }
        uint64_t due = sent + d;
        if (!reorder) { due = std::max(due, last_due_ns); last_due_ns = due; }
        return due;
    }
    // link.rs Link::admit: the due time of a packet arriving now, or 0 when it is dropped.
    uint64_t Admit(uint64_t now, uint32_t size) {
        packets_in++;
        bytes_in += size;
        if (DownUntil(now) != 0) { drop_outage++; return 0; }
        if (Lose()) { drop_loss++; return 0; }
        Advance(now);
        if (!Fits(size)) { drop_queue++; return 0; }
        std::pair<uint64_t, uint64_t> se;
        if (!trace_ms.empty()) se = ServeTrace(now, size);
        else if (rate_bps > 0) se = ServeRate(now, size);
        else { uint64_t t = NextUp(now); se = {t, t}; }
        if (se.first > now) Push(se.first, size);
        delivered++;
        delivered_bytes += size;
        return std::max<uint64_t>(Due(se.second), 1);
    }
    void Sample(double now_s, uint64_t now_ns) {
        Advance(now_ns);
        qs_time_s.push_back(now_s);
        qs_packets.push_back(qdisc ? qdisc->GetNPackets() : (uint32_t)waiting.size());
        qs_bytes.push_back(qdisc ? qdisc->GetNBytes() : q_bytes);
    }
};

// A point-to-point channel whose two directions are emulated links. The devices on it send
// at a rate far above the link's (their own serialization is negligible); the channel decides
// each packet's fate and delivery time as the emulator would.
class EmulatedChannel : public PointToPointChannel {
  public:
    Direction dir[2];   // [0]: from the first device attached (a_to_b), [1]: the other way
    double sample_period_s = 0.0;

    bool TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime) override {
        int i = (src == GetSource(0)) ? 0 : 1;
        Ptr<PointToPointNetDevice> dst = GetDestination(i);
        int64_t now = (Simulator::Now() + txTime).GetNanoSeconds();
        uint32_t size = p->GetSize() > kPppHeaderBytes ? p->GetSize() - kPppHeaderBytes : p->GetSize();
        uint64_t due = dir[i].Admit((uint64_t)now, size);
        if (due == 0) return true;
        Simulator::ScheduleWithContext(dst->GetNode()->GetId(),
                                       NanoSeconds((int64_t)due) - Simulator::Now(),
                                       &PointToPointNetDevice::Receive, dst, p->Copy());
        return true;
    }
    void StartSampling(double period_s) {
        sample_period_s = period_s;
        if (period_s > 0) Simulator::Schedule(Seconds(0), &EmulatedChannel::SampleNow, this);
    }
    void SampleNow() {
        Time now = Simulator::Now();
        for (auto& d : dir) d.Sample(now.GetSeconds(), (uint64_t)now.GetNanoSeconds());
        Simulator::Schedule(Seconds(sample_period_s), &EmulatedChannel::SampleNow, this);
    }
};

// Two routers joined by an emulated channel; their devices send at `rate` (far above the link's).
struct Trunk {
    Ptr<EmulatedChannel> channel;
    NetDeviceContainer devices;
};

inline Trunk ConnectEmulated(Ptr<Node> a, Ptr<Node> b, std::string rate, uint16_t mtu = 1500) {
    Trunk t;
    t.channel = CreateObject<EmulatedChannel>();
    for (Ptr<Node> n : {a, b}) {
        Ptr<PointToPointNetDevice> dev = CreateObject<PointToPointNetDevice>();
        dev->SetAddress(Mac48Address::Allocate());
        dev->SetDataRate(DataRate(rate));
        dev->SetMtu(mtu);
        Ptr<DropTailQueue<Packet>> q = CreateObject<DropTailQueue<Packet>>();
        q->SetMaxSize(QueueSize("1000000p"));
        dev->SetQueue(q);
        n->AddDevice(dev);
        dev->Attach(t.channel);
        t.devices.Add(dev);
    }
    return t;
}

inline Ptr<UniformRandomVariable> NewUniform(int64_t stream) {
    Ptr<UniformRandomVariable> u = CreateObject<UniformRandomVariable>();
    u->SetStream(stream);
    return u;
}

// Removes the queue discipline ns-3 installs on a device when it gets an address (FqCoDel):
// the testbed's hosts have none that fills, and the link's queue is the emulated one.
inline void RemoveQdiscs(NetDeviceContainer devs) {
    for (uint32_t i = 0; i < devs.GetN(); i++) {
        Ptr<NetDevice> dev = devs.Get(i);
        Ptr<TrafficControlLayer> tc = dev->GetNode()->GetObject<TrafficControlLayer>();
        if (tc && tc->GetRootQueueDiscOnDevice(dev)) tc->DeleteRootQueueDiscOnDevice(dev);
    }
}

inline Ptr<TcpL4Protocol> TcpL4(Ptr<Node> n) { return n->GetObject<TcpL4Protocol>(); }

// A queue discipline (src/tcpdelay/sim/aqm.py) on the device that sends direction `d` of an
// emulated channel: the device serializes at `device_rate_bps` (0: keep its rate) with a
// one-packet queue and flow control (NetDeviceQueueInterface, as PointToPointHelper sets it
// up), so packets wait in the queue disc; the channel then has no rate and no queue of its own.
struct QdiscSetup {
    std::string type;
    std::vector<std::string> names, values;  // attributes, as ns-3 strings
    uint32_t quantum = 0;                    // FqCoDel's (0: not set)
    uint64_t device_rate_bps = 0;
};

inline void InstallQdisc(Ptr<NetDevice> device, Direction* d, const QdiscSetup& s) {
    Ptr<PointToPointNetDevice> dev = DynamicCast<PointToPointNetDevice>(device);
    if (s.device_rate_bps) dev->SetDataRate(DataRate(s.device_rate_bps));
    Ptr<Queue<Packet>> q = dev->GetQueue();
    q->SetMaxSize(QueueSize("1p"));
    if (!dev->GetObject<NetDeviceQueueInterface>()) {
        Ptr<NetDeviceQueueInterface> ndqi = CreateObject<NetDeviceQueueInterface>();
        ndqi->GetTxQueue(0)->ConnectQueueTraces(q);
        dev->AggregateObject(ndqi);
    }
    Ptr<TrafficControlLayer> tc = dev->GetNode()->GetObject<TrafficControlLayer>();
    if (tc->GetRootQueueDiscOnDevice(dev)) tc->DeleteRootQueueDiscOnDevice(dev);
    TrafficControlHelper tch;
    tch.SetRootQueueDisc(s.type);
    Ptr<QueueDisc> qd = tch.Install(device).Get(0);
    for (size_t i = 0; i < s.names.size(); i++) qd->SetAttribute(s.names[i], StringValue(s.values[i]));
    if (s.quantum) DynamicCast<FqCoDelQueueDisc>(qd)->SetQuantum(s.quantum);
    d->qdisc = qd;
    qd->TraceConnectWithoutContext("SojournTime", MakeCallback(&Direction::OnSojourn, d));
    qd->TraceConnectWithoutContext("PacketsInQueue", MakeCallback(&Direction::OnQdiscPackets, d));
    qd->TraceConnectWithoutContext("BytesInQueue", MakeCallback(&Direction::OnQdiscBytes, d));
}

// A queue disc's counters in the emulator's terms, from QueueDisc::GetStats: its drop reasons
// sorted into the discipline's own decisions (`aqm`: CoDel's "Target exceeded drop", PIE's
// "Unforced drop", also when a child queue disc made them, as FqCoDel's per-flow CoDel) and
// the rest (`queue`: the limit — CoDel's and FqCoDel's "Overlimit drop", PIE's "Forced drop");
// CE marks are every mark it made.
struct QdiscCounts {
    uint64_t received = 0, received_bytes = 0, drop_queue = 0, drop_aqm = 0, marks = 0;
};

inline bool EndsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

inline QdiscCounts CountQdisc(Ptr<QueueDisc> qd) {
    QdiscCounts c;
    const QueueDisc::Stats& st = qd->GetStats();
    c.received = st.nTotalReceivedPackets;
    c.received_bytes = st.nTotalReceivedBytes;
    c.marks = st.nTotalMarkedPackets;
    for (const auto* m : {&st.nDroppedPacketsBeforeEnqueue, &st.nDroppedPacketsAfterDequeue}) {
        for (const auto& [reason, n] : *m) {
            if (EndsWith(reason, CoDelQueueDisc::TARGET_EXCEEDED_DROP) ||
                EndsWith(reason, PieQueueDisc::UNFORCED_DROP))
                c.drop_aqm += n;
            else
                c.drop_queue += n;
        }
    }
    return c;
}

// ------------------------------------------------------------------------------------------
// TCP state over time (the tcp_state records' columns that ns-3 has).

class TcpStateProbe : public Object {
  public:
    int32_t flow_id = 0;
    int16_t connection = 0;
    uint32_t mss = 1448;
    double period_s = 0.01;
    Ptr<Socket> socket;
    // latest values from the socket's trace sources
    uint32_t cwnd = 0, ssthresh = std::numeric_limits<uint32_t>::max(), in_flight = 0;
    double srtt_s = std::nan(""), pacing_bps = std::nan("");
    int16_t ca_state = 0;
    uint64_t retransmits = 0, retransmitted_bytes = 0, rto_events = 0, acked_bytes = 0;
    double min_rtt_s = std::numeric_limits<double>::infinity();
    uint32_t highest_sent = 0, first_seq = 0;
    bool started = false, have_first = false, stopped = false;
    // rows
    std::vector<double> t_s, srtt, pacing;
    std::vector<int64_t> cwnd_seg, ssthresh_seg, retx, acked;
    std::vector<int16_t> ca;

    void Attach(Ptr<Socket> s, double period, double first_sample_s) {
        socket = s;
        period_s = period;
        s->TraceConnectWithoutContext("CongestionWindow", MakeCallback(&TcpStateProbe::OnCwnd, this));
        s->TraceConnectWithoutContext("SlowStartThreshold", MakeCallback(&TcpStateProbe::OnSsthresh, this));
        s->TraceConnectWithoutContext("RTT", MakeCallback(&TcpStateProbe::OnRtt, this));
        s->TraceConnectWithoutContext("CongState", MakeCallback(&TcpStateProbe::OnCongState, this));
        s->TraceConnectWithoutContext("HighestRxAck", MakeCallback(&TcpStateProbe::OnAck, this));
        s->TraceConnectWithoutContext("PacingRate", MakeCallback(&TcpStateProbe::OnPacing, this));
        s->TraceConnectWithoutContext("Tx", MakeCallback(&TcpStateProbe::OnTx, this));
        s->TraceConnectWithoutContext("LastRTT", MakeCallback(&TcpStateProbe::OnLastRtt, this));
        if (period > 0) Simulator::Schedule(Seconds(first_sample_s) - Simulator::Now(), &TcpStateProbe::Sample, this);
    }
    void Stop() { stopped = true; }
    // for a socket whose SYN (or SYN-ACK) was sent before the probe was attached
    void AfterHandshake(uint32_t isn) { have_first = true; first_seq = isn + 1; highest_sent = isn + 1; }
    void OnCwnd(uint32_t, uint32_t v) { cwnd = v; }
    void OnSsthresh(uint32_t, uint32_t v) { ssthresh = v; }
    void OnRtt(Time, Time v) { srtt_s = v.GetSeconds(); }
    void OnCongState(TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t v) {
        if (v == TcpSocketState::CA_LOSS && ca_state != TcpSocketState::CA_LOSS) rto_events++;
        ca_state = (int16_t)v;
    }
    void OnLastRtt(Time, Time v) { if (v.IsStrictlyPositive()) min_rtt_s = std::min(min_rtt_s, v.GetSeconds()); }
    void OnPacing(DataRate, DataRate v) { pacing_bps = (double)v.GetBitRate(); }
    void OnAck(SequenceNumber32, SequenceNumber32 v) {
        if (have_first) acked_bytes = (uint32_t)(v.GetValue() - first_seq);
    }
    void OnTx(Ptr<const Packet> p, const TcpHeader& hdr, Ptr<const TcpSocketBase>) {
        uint32_t len = p->GetSize();
        uint32_t seq = hdr.GetSequenceNumber().GetValue();
        if (!have_first) {  // the SYN: data starts one after it
            have_first = true;
            first_seq = seq + 1;
            highest_sent = seq + 1;
            return;
        }
        if (len == 0) return;
        uint32_t end = seq + len;
        if ((int32_t)(end - highest_sent) <= 0) { retransmits += (len + mss - 1) / mss; retransmitted_bytes += len; }
        else highest_sent = end;
    }
    void Sample() {
        if (stopped) return;
        started = true;
        t_s.push_back(Simulator::Now().GetSeconds());
        cwnd_seg.push_back(cwnd / mss);
        ssthresh_seg.push_back(ssthresh >= 0x7fffffffu ? -1 : (int64_t)(ssthresh / mss));
        srtt.push_back(srtt_s);
        pacing.push_back(pacing_bps);
        retx.push_back((int64_t)retransmits);
        ca.push_back(ca_state);
        acked.push_back((int64_t)acked_bytes);
        Simulator::Schedule(Seconds(period_s), &TcpStateProbe::Sample, this);
    }
};

// ------------------------------------------------------------------------------------------
// Media: a source's packets at their times (transport/sender.py, transport/receiver.py).
//
// TCP: N connections (Brosh et al. Sec. 7.2: parallel connections), each with its own
// application queue written as far as its socket takes it; every packet is split into
// `pieces[i]` RTP packets (split-N, Sec. 7.1), each framed by its 2-byte RFC 4571 length, so it
// is `wire[i]` bytes on its connection. The connection of a packet is picked when it is due:
// `blind` round robin, or `intelligent` (transport/scheduler.py): the least unsent data (its
// application queue and what its socket holds unsent) among the connections not in recovery or
// loss, ties round robin after the last one picked. Proactive drop (Sec. 8.1) skips a packet
// whose connection's unsent bytes would take more than `drop_bound_s` to drain at cwnd per
// RTT; a full application queue (`max_queue_bytes`) skips it too. The ledger is what the
// receiver would read from the packets' headers: which packet ends where on which connection.
// UDP: one socket; each piece one datagram carrying (seq, piece, pieces) in its first bytes.

class Ledger : public Object {
  public:
    std::vector<std::vector<uint64_t>> end;   // per connection: stream offset just past each packet
    std::vector<std::vector<uint32_t>> seq;   // per connection: those packets' seq
    std::vector<uint64_t> queued;             // per connection: bytes queued so far
    void Resize(size_t n) { end.resize(n); seq.resize(n); queued.resize(n, 0); }
};

class MediaSender;

struct SenderConn {
    MediaSender* owner = nullptr;
    uint32_t index = 0;
    Ptr<Socket> socket;
    bool connected = false, failed = false;
    uint64_t pending = 0, written = 0;
    uint32_t packets = 0;
    uint32_t cwnd = 0;
    int16_t ca = 0;
    double srtt_s = 0;
    SequenceNumber32 next_tx;
    void OnCa(TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t v) { ca = (int16_t)v; }
    void OnCwnd(uint32_t, uint32_t v) { cwnd = v; }
    void OnRtt(Time, Time v) { srtt_s = v.GetSeconds(); }
    void OnNextTx(SequenceNumber32, SequenceNumber32 v) { next_tx = v; }
    uint64_t KernelUnsent() const {
        Ptr<TcpSocketBase> tcp = DynamicCast<TcpSocketBase>(socket);
        if (!tcp || !connected) return 0;
        int32_t n = tcp->GetTxBuffer()->TailSequence() - next_tx;
        return n > 0 ? (uint64_t)n : 0;
    }
    uint64_t Unsent() const { return pending + KernelUnsent(); }
};

class MediaSender : public Application {
  public:
    // configuration
    Address peer;
    bool udp = false;
    std::vector<double> times_s;       // each packet's time after the start
    std::vector<uint32_t> sizes;       // each packet's size (bytes)
    std::vector<uint32_t> pieces;      // its RTP packets (split-N); empty: 1 each
    std::vector<uint32_t> wire;        // TCP: its bytes on the connection, framing included
    double first_s = 0;                // the flow's start (absolute): packet i is due at first_s + times_s[i]
    int scheduler = 0;                 // 0 blind, 1 intelligent
    double drop_bound_s = -1;          // proactive drop (< 0: off)
    uint64_t max_queue_bytes = 64ull << 20;
    uint16_t base_port = 0;            // TCP: connection c is bound to base_port + c (how the receiver tells them apart)
    Ptr<Ledger> ledger;
    // state and results
    std::vector<SenderConn*> conns;
    std::vector<int16_t> conn_of;      // per packet emitted: its connection, -1 if skipped
    std::vector<int16_t> skipped;      // per packet emitted: 0 sent, 1 proactive drop, 2 queue full
    size_t next = 0;
    uint64_t packets_sent = 0, dropped_packets = 0, queue_full_packets = 0, queued_at_end = 0, rtp_packets = 0;
    uint32_t rr = 0;
    int last = -1;
    bool failed = false;

    ~MediaSender() override { for (auto* c : conns) delete c; }

    void AddConnection(Ptr<Socket> s) {
        SenderConn* c = new SenderConn();
        c->owner = this;
        c->index = (uint32_t)conns.size();
        c->socket = s;
        conns.push_back(c);
    }
    void Setup(Ptr<Socket> s, Address to) { AddConnection(s); peer = to; }

    void StartApplication() override {
        if (ledger) ledger->Resize(conns.size());
        for (SenderConn* c : conns) {
            if (udp) { c->socket->Connect(peer); c->connected = true; continue; }
            if (base_port) c->socket->Bind(InetSocketAddress(Ipv4Address::GetAny(), base_port + c->index));
            c->socket->SetConnectCallback(MakeCallback(&MediaSender::OnConnected, this),
                                          MakeCallback(&MediaSender::OnConnectFailed, this));
            c->socket->SetSendCallback(MakeCallback(&MediaSender::OnSendSpace, this));
            c->socket->TraceConnectWithoutContext("CongState", MakeCallback(&SenderConn::OnCa, c));
            c->socket->TraceConnectWithoutContext("CongestionWindow", MakeCallback(&SenderConn::OnCwnd, c));
            c->socket->TraceConnectWithoutContext("RTT", MakeCallback(&SenderConn::OnRtt, c));
            c->socket->TraceConnectWithoutContext("NextTxSequence", MakeCallback(&SenderConn::OnNextTx, c));
            c->socket->Connect(peer);
        }
        // connected when the application starts (as the testbed's sender, before the flow's
        // start); the packets come at their times
        if (!times_s.empty()) Simulator::Schedule(Seconds(first_s + times_s[0]) - Simulator::Now(), &MediaSender::Emit, this);
    }
    void StopApplication() override {
        for (SenderConn* c : conns) { queued_at_end += c->pending; c->socket->Close(); }
    }
    SenderConn* Of(Ptr<Socket> s) {
        for (SenderConn* c : conns) if (c->socket == s) return c;
        return nullptr;
    }
    void OnConnected(Ptr<Socket> s) { if (SenderConn* c = Of(s)) { c->connected = true; Flush(c); } }
    void OnConnectFailed(Ptr<Socket> s) { if (SenderConn* c = Of(s)) c->failed = failed = true; }
    void OnSendSpace(Ptr<Socket> s, uint32_t) { if (SenderConn* c = Of(s)) Flush(c); }

    uint32_t Pick() {
        uint32_t n = (uint32_t)conns.size();
        if (scheduler == 0 || n == 1) { uint32_t i = rr; rr = (rr + 1) % n; return i; }
        uint32_t start = (uint32_t)(last + 1) % n;
        int best = -1;
        uint64_t best_unsent = 0;
        for (int pass = 0; pass < 2 && best < 0; pass++) {
            for (uint32_t k = 0; k < n; k++) {
                uint32_t i = (start + k) % n;
                SenderConn* c = conns[i];
                bool busy = c->ca == TcpSocketState::CA_RECOVERY || c->ca == TcpSocketState::CA_LOSS;
                if (pass == 0 && busy) continue;
                uint64_t u = c->Unsent();
                if (best < 0 || u < best_unsent) { best = (int)i; best_unsent = u; }
            }
        }
        last = best;
        return (uint32_t)best;
    }
    double ImpliedDelay(SenderConn* c, uint64_t unsent) const {
        if (c->cwnd == 0 || c->srtt_s <= 0) return 0.0;
        return (double)unsent / ((double)c->cwnd / c->srtt_s);
    }

    void Emit() {
        uint32_t size = sizes[next];
        uint32_t np = pieces.empty() ? 1 : pieces[next];
        uint32_t ci = udp ? 0 : Pick();
        SenderConn* c = conns[ci];
        int16_t skip = 0;
        if (!udp) {
            uint64_t unsent = c->Unsent();
            if (drop_bound_s >= 0 && unsent > 0 && ImpliedDelay(c, unsent) > drop_bound_s) { skip = 1; dropped_packets++; }
            else if (c->pending + size > max_queue_bytes) { skip = 2; queue_full_packets++; }
        }
        conn_of.push_back(skip ? -1 : (int16_t)ci);
        skipped.push_back(skip);
        packets_sent++;
        if (!skip) {
            if (udp) {
                uint8_t buf[65536];
                uint32_t base = size / np, extra = size % np, off = 0;
                for (uint32_t k = 0; k < np; k++) {
                    uint32_t piece = base + (k < extra ? 1 : 0);
                    std::memset(buf, 0, piece);
                    uint32_t sq = (uint32_t)next;
                    std::memcpy(buf, &sq, 4);
                    buf[4] = (uint8_t)k;
                    buf[5] = (uint8_t)np;
                    c->socket->Send(Create<Packet>(buf, piece));
                    off += piece;
                }
            } else {
                uint32_t bytes = wire.empty() ? size + 2 : wire[next];
                c->pending += bytes;
                if (ledger) {
                    ledger->queued[ci] += bytes;
                    ledger->end[ci].push_back(ledger->queued[ci]);
                    ledger->seq[ci].push_back((uint32_t)next);
                }
                c->packets++;
                Flush(c);
            }
            rtp_packets += np;
        }
        next++;
        if (next < times_s.size()) {
            Simulator::Schedule(Seconds(times_s[next] - times_s[next - 1]), &MediaSender::Emit, this);
        }
    }
    void Flush(SenderConn* c) {
        if (udp || !c->connected) return;
        while (c->pending > 0) {
            uint32_t room = c->socket->GetTxAvailable();
            if (room == 0) return;
            uint32_t n = (uint32_t)std::min<uint64_t>(c->pending, std::min<uint32_t>(room, 65536));
            int sent = c->socket->Send(Create<Packet>(n));
            if (sent <= 0) return;
            c->pending -= (uint64_t)sent;
            c->written += (uint64_t)sent;
        }
    }
    uint64_t Pending() const { uint64_t p = 0; for (auto* c : conns) p += c->pending; return p; }
    uint32_t Connections() const { return (uint32_t)conns.size(); }
    uint32_t PacketsOn(uint32_t i) const { return conns[i]->packets; }
    Ptr<Socket> SocketOf(uint32_t i) const { return conns[i]->socket; }
};

class MediaReceiver : public Application {
  public:
    bool udp = false;
    size_t n_packets = 0;
    uint16_t base_port = 0;            // TCP: a connection from port base_port + c is connection c
    Ptr<Ledger> ledger;
    // results
    std::vector<double> recv_time_s;   // per packet; NaN if never read (whole)
    std::vector<uint32_t> order;       // UDP: the seq of each datagram in arrival order
    std::vector<int16_t> got_pieces;   // UDP: pieces of each packet arrived
    uint64_t received_bytes = 0;
    uint64_t foreign = 0;
    Ptr<Socket> listener;
    std::vector<Ptr<Socket>> accepted;
    std::vector<int> conn_index;
    std::vector<uint64_t> conn_bytes;
    std::vector<size_t> conn_next;

    void Setup(Ptr<Socket> s) { listener = s; }

    void StartApplication() override {
        recv_time_s.assign(n_packets, std::nan(""));
        got_pieces.assign(n_packets, 0);
        listener->SetRecvCallback(MakeCallback(&MediaReceiver::OnRecv, this));
        if (!udp) {
            listener->Listen();
            listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                        MakeCallback(&MediaReceiver::OnAccept, this));
        }
    }
    void StopApplication() override {}
    void OnAccept(Ptr<Socket> s, const Address& from) {
        int c = (int)InetSocketAddress::ConvertFrom(from).GetPort() - (int)base_port;
        accepted.push_back(s);
        conn_index.push_back(c);
        if (c >= 0 && (size_t)c >= conn_bytes.size()) { conn_bytes.resize(c + 1, 0); conn_next.resize(c + 1, 0); }
        s->SetRecvCallback(MakeCallback(&MediaReceiver::OnRecv, this));
    }
    void OnRecv(Ptr<Socket> s) {
        double now = Simulator::Now().GetSeconds();
        int c = -1;
        for (size_t i = 0; i < accepted.size(); i++) if (accepted[i] == s) c = conn_index[i];
        Ptr<Packet> p;
        while ((p = s->Recv())) {
            uint32_t len = p->GetSize();
            if (len == 0) break;
            received_bytes += len;
            if (udp) {
                uint8_t head[6] = {0};
                p->CopyData(head, std::min<uint32_t>(6, len));
                uint32_t seq = 0;
                std::memcpy(&seq, head, 4);
                order.push_back(seq);
                if (seq >= n_packets) { foreign++; continue; }
                uint8_t np = head[5] ? head[5] : 1;
                if (++got_pieces[seq] == np && std::isnan(recv_time_s[seq])) recv_time_s[seq] = now;
            } else if (c >= 0 && ledger && (size_t)c < ledger->end.size()) {
                conn_bytes[c] += len;
                const auto& end = ledger->end[c];
                size_t& k = conn_next[c];
                while (k < end.size() && conn_bytes[c] >= end[k]) recv_time_s[ledger->seq[c][k++]] = now;
            } else {
                foreign += len;
            }
        }
    }
};

// ------------------------------------------------------------------------------------------
// TCP cross traffic as request/response (src/tcpdelay/traffic/response_server.py): a client on
// the receiving side connects to a server on the sending side and asks; the server answers
// each connection, in the order they come, with the next of its responses:
//   kind 0  `size` bytes as fast as TCP takes them, then close          (page load, sized bulk)
//   kind 1  as fast as TCP takes them for `duration` seconds, then close (a web "on" period)
//   kind 2  `segment`-byte messages at exponential gaps (mean `gap_mean_s`) until stop (poisson web)
//   kind 3  as fast as TCP takes them until stop                          (unlimited bulk)
//   kind 4  `value` bytes as kind 0, timed: the last byte's ACK, retransmissions, RTOs and fast
//           recoveries of the connection                                  (transfers)
// Every server socket's send buffer follows the congestion window as Linux's autotuning does.

constexpr uint32_t kRequestBytes = 64;     // what a client asks with (a small HTTP-like request)

struct Response {
    int kind = 0;
    double value = 0;          // size (bytes) or duration (s)
};

class ResponseServer : public Application {
  public:
    std::vector<Response> responses;   // one per connection, in the order they are accepted
    uint32_t segment = 1448;
    double gap_mean_s = 0.05;
    double stop_s = 0;                 // absolute
    uint32_t max_buffer = 4194304;
    Ptr<Socket> listener;
    Ptr<ExponentialRandomVariable> gaps;
    size_t next_response = 0;
    uint64_t written = 0;
    std::vector<std::string> warnings;

    struct Conn {
        Ptr<Socket> s;
        Response r;
        bool asked = false, closing = false;
        uint64_t sent = 0;
        uint32_t request = 0, buffer = 0;
        double started = 0;
        uint32_t pending = 0;        // kind 2: message bytes waiting for room
        // kind 4 (a timed transfer, traffic/transfers.py): the last byte's ACK and the counters
        double acked_s = -1;
        uint32_t highest = 1;        // one past the highest data byte sent (ns-3's ISN is 0)
        int64_t retransmits = 0, rtos = 0, recoveries = 0;
        int16_t ca = 0;
        uint16_t peer_port = 0;
    };
    std::vector<Conn*> conns;
    // TCP state of every connection served (connection = its index), when probe_period_s > 0
    int32_t flow_id = 0;
    double probe_period_s = 0;
    uint32_t mss = 1448;
    std::vector<Ptr<TcpStateProbe>> probes;

    void Setup(Ptr<Socket> s) { listener = s; }
    void StartApplication() override {
        listener->Listen();
        listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                    MakeCallback(&ResponseServer::OnAccept, this));
    }
    void StopApplication() override {}
    ~ResponseServer() override { for (Conn* c : conns) delete c; }

    Conn* Find(Ptr<Socket> s) {
        for (Conn* c : conns) if (c->s == s) return c;
        return nullptr;
    }
    void OnAccept(Ptr<Socket> s, const Address& from) {
        Conn* c = new Conn();
        c->s = s;
        if (next_response < responses.size()) c->r = responses[next_response++];
        else { c->r.kind = 0; c->r.value = 0; warnings.push_back("a connection beyond the planned responses"); }
        conns.push_back(c);
        if (InetSocketAddress::IsMatchingType(from)) c->peer_port = InetSocketAddress::ConvertFrom(from).GetPort();
        if (c->r.kind == 4) {
            s->TraceConnectWithoutContext("HighestRxAck", MakeBoundCallback(&ResponseServer::OnAckOf, c));
            s->TraceConnectWithoutContext("Tx", MakeBoundCallback(&ResponseServer::OnTxOf, c));
            s->TraceConnectWithoutContext("CongState", MakeBoundCallback(&ResponseServer::OnCongOf, c));
        }
        s->SetRecvCallback(MakeCallback(&ResponseServer::OnRecv, this));
        s->SetSendCallback(MakeCallback(&ResponseServer::OnSendSpace, this));
        s->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&ResponseServer::OnCwndOf, c));
        Autotune(c, 0);
        if (probe_period_s > 0) {
            Ptr<TcpStateProbe> probe = CreateObject<TcpStateProbe>();
            probe->flow_id = flow_id;
            probe->connection = (int16_t)(conns.size() - 1);
            probe->mss = mss;
            probe->AfterHandshake(0);   // accepted: its SYN-ACK is gone already (ns-3's ISN is 0)
            probe->Attach(s, probe_period_s, Simulator::Now().GetSeconds());
            probes.push_back(probe);
        }
    }
    void StopProbes() { for (auto& p : probes) p->Stop(); }
    static void OnAckOf(Conn* c, SequenceNumber32, SequenceNumber32 v) {
        if (c->acked_s < 0 && c->asked && (uint64_t)v.GetValue() >= (uint64_t)c->r.value + 1)
            c->acked_s = Simulator::Now().GetSeconds();
    }
    static void OnTxOf(Conn* c, Ptr<const Packet> p, const TcpHeader& hdr, Ptr<const TcpSocketBase>) {
        uint32_t len = p->GetSize();
        if (len == 0) return;
        uint32_t end = hdr.GetSequenceNumber().GetValue() + len;
        if ((int32_t)(end - c->highest) <= 0) c->retransmits++;
        else c->highest = end;
    }
    static void OnCongOf(Conn* c, TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t v) {
        if (v == TcpSocketState::CA_LOSS && c->ca != TcpSocketState::CA_LOSS) c->rtos++;
        if (v == TcpSocketState::CA_RECOVERY && c->ca != TcpSocketState::CA_RECOVERY) c->recoveries++;
        c->ca = (int16_t)v;
    }
    // kind 4's results of the i-th connection accepted (-1: not timed / not acknowledged)
    size_t Served() const { return conns.size(); }
    int Kind(size_t i) const { return conns[i]->r.kind; }
    double WriteS(size_t i) const { return conns[i]->asked ? conns[i]->started : -1; }
    double AckedS(size_t i) const { return conns[i]->acked_s; }
    int64_t Retransmits(size_t i) const { return conns[i]->retransmits; }
    int64_t Rtos(size_t i) const { return conns[i]->rtos; }
    int64_t Recoveries(size_t i) const { return conns[i]->recoveries; }
    uint64_t Sent(size_t i) const { return conns[i]->sent; }
    int PeerPort(size_t i) const { return conns[i]->peer_port; }
    static void OnCwndOf(Conn* c, uint32_t, uint32_t cwnd) { Autotune(c, cwnd); }
    static void Autotune(Conn* c, uint32_t cwnd) {
        uint32_t want = std::max<uint32_t>(2 * cwnd, 16384);
        if (want <= c->buffer) return;
        c->buffer = want;
        Ptr<TcpSocketBase> tcp = DynamicCast<TcpSocketBase>(c->s);
        if (tcp) tcp->GetTxBuffer()->SetMaxBufferSize(want);
    }
    void OnRecv(Ptr<Socket> s) {
        Conn* c = Find(s);
        Ptr<Packet> p;
        while ((p = s->Recv())) {
            if (p->GetSize() == 0) break;
            if (c) c->request += p->GetSize();
        }
        if (c && !c->asked && c->request >= kRequestBytes) {
            c->asked = true;
            c->started = Simulator::Now().GetSeconds();
            if (c->r.kind == 2) Simulator::Schedule(Seconds(gaps->GetValue()), &ResponseServer::Message, this, c);
            if (c->r.kind == 1) Simulator::Schedule(Seconds(c->r.value), &ResponseServer::Finish, this, c);
            Fill(c);
        }
    }
    void OnSendSpace(Ptr<Socket> s, uint32_t) { if (Conn* c = Find(s)) Fill(c); }
    void Message(Conn* c) {
        if (c->closing) return;
        if (Simulator::Now().GetSeconds() >= stop_s) { Finish(c); return; }
        c->pending += segment;
        Fill(c);
        Simulator::Schedule(Seconds(gaps->GetValue()), &ResponseServer::Message, this, c);
    }
    void Finish(Conn* c) {
        if (c->closing) return;
        c->closing = true;
        c->s->Close();
    }
    void Fill(Conn* c) {
        if (!c->asked || c->closing) return;
        double now = Simulator::Now().GetSeconds();
        for (;;) {
            uint32_t room = c->s->GetTxAvailable();
            uint64_t want;
            switch (c->r.kind) {
                case 0: case 4: want = (uint64_t)c->r.value - c->sent; break;
                case 2: want = c->pending; break;
                default: want = (now < stop_s) ? room : 0; break;
            }
            uint32_t n = (uint32_t)std::min<uint64_t>(want, std::min<uint32_t>(room, 65536));
            if (n == 0) break;
            int sent = c->s->Send(Create<Packet>(n));
            if (sent <= 0) break;
            c->sent += (uint64_t)sent;
            written += (uint64_t)sent;
            if (c->r.kind == 2) c->pending -= (uint32_t)sent;
        }
        if ((c->r.kind == 0 || c->r.kind == 4) && c->sent >= (uint64_t)c->r.value) Finish(c);
        if (c->r.kind == 3 && now >= stop_s) Finish(c);
    }
};

// The receiving side's client: opens connections to the server and reads what comes back.
//   schedule 0  one connection per start time in `starts` (absolute)         (page load: all at once; bulk; poisson)
//   schedule 1  one after another: the next `offs[k]` seconds after the k-th closed (web on/off)
class FetchClient : public Application {
  public:
    Address server;
    int schedule = 0;
    std::vector<double> starts;     // schedule 0
    std::vector<double> offs;       // schedule 1: the gaps after each connection
    double first_s = 0, end_s = 0;  // schedule 1: the first start, and no new connection after end
    uint32_t segment = 0;           // 0: the host's; else the MSS this client asks for
    std::vector<double> sizes;      // if given: connection i is done (and closed) once it read sizes[i] bytes
    double timeout_s = 0;           // > 0: a connection not done this long after it opened fails (closed; the next opens)
    // results, per connection
    std::vector<double> open_s, connect_s, first_byte_s, done_s;
    std::vector<int> syns, local_port;   // SYNs sent (1 + retransmissions), the client's port
    std::vector<uint64_t> bytes;
    std::vector<int> failed;
    // how to make a socket (set from Python: the host's TCP settings)
    Callback<Ptr<Socket>> make_socket;
    std::vector<Ptr<Socket>> sockets;

    void StartApplication() override {
        if (schedule == 0) for (double t : starts) Simulator::Schedule(Seconds(t) - Simulator::Now(), &FetchClient::Open, this);
        else Simulator::Schedule(Seconds(first_s) - Simulator::Now(), &FetchClient::Open, this);
    }
    void StopApplication() override {}
    int Index(Ptr<Socket> s) {
        for (size_t i = 0; i < sockets.size(); i++) if (sockets[i] == s) return (int)i;
        return -1;
    }
    void Open() {
        Ptr<Socket> s = make_socket();
        sockets.push_back(s);
        open_s.push_back(Simulator::Now().GetSeconds());
        connect_s.push_back(-1); first_byte_s.push_back(-1); done_s.push_back(-1);
        bytes.push_back(0); failed.push_back(0); syns.push_back(0); local_port.push_back(-1);
        s->TraceConnectWithoutContext("Tx", MakeCallback(&FetchClient::OnTx, this));
        if (timeout_s > 0) Simulator::Schedule(Seconds(timeout_s), &FetchClient::GiveUp, this, sockets.size() - 1);
        s->SetConnectCallback(MakeCallback(&FetchClient::OnConnected, this), MakeCallback(&FetchClient::OnFailed, this));
        s->SetRecvCallback(MakeCallback(&FetchClient::OnRecv, this));
        s->SetCloseCallbacks(MakeCallback(&FetchClient::OnClosed, this), MakeCallback(&FetchClient::OnError, this));
        s->Connect(server);
    }
    void OnConnected(Ptr<Socket> s) {
        int i = Index(s);
        if (i < 0) return;
        connect_s[i] = Simulator::Now().GetSeconds();
        Address local;
        if (s->GetSockName(local) == 0 && InetSocketAddress::IsMatchingType(local))
            local_port[i] = InetSocketAddress::ConvertFrom(local).GetPort();
        s->Send(Create<Packet>(kRequestBytes));
    }
    void OnTx(Ptr<const Packet>, const TcpHeader& hdr, Ptr<const TcpSocketBase> from) {
        if (!(hdr.GetFlags() & TcpHeader::SYN)) return;
        for (size_t i = 0; i < sockets.size(); i++)
            if (PeekPointer(sockets[i]) == (const Socket*)PeekPointer(from)) { syns[i]++; return; }
    }
    void GiveUp(size_t i) {
        if (done_s[i] >= 0 || failed[i]) return;
        failed[i] = 1;
        done_s[i] = Simulator::Now().GetSeconds();
        sockets[i]->Close();
        Next();
    }
    void OnFailed(Ptr<Socket> s) { int i = Index(s); if (i >= 0) { failed[i] = 1; Next(); } }
    void OnError(Ptr<Socket> s) { int i = Index(s); if (i >= 0 && done_s[i] < 0) { failed[i] = 1; done_s[i] = Simulator::Now().GetSeconds(); Next(); } }
    void OnRecv(Ptr<Socket> s) {
        int i = Index(s);
        Ptr<Packet> p;
        while ((p = s->Recv())) {
            if (p->GetSize() == 0) break;
            if (i < 0) continue;
            if (first_byte_s[i] < 0) first_byte_s[i] = Simulator::Now().GetSeconds();
            bytes[i] += p->GetSize();
        }
        if (i >= 0 && (size_t)i < sizes.size() && done_s[i] < 0 && (double)bytes[i] >= sizes[i]) {
            done_s[i] = Simulator::Now().GetSeconds();   // all read: no need to wait for the FIN
            s->Close();
            Next();
        }
    }
    void OnClosed(Ptr<Socket> s) {    // the server closed after its response: done
        int i = Index(s);
        if (i < 0 || done_s[i] >= 0) return;
        done_s[i] = Simulator::Now().GetSeconds();
        s->Close();
        Next();
    }
    void Next() {
        if (schedule != 1) return;
        size_t k = sockets.size() - 1;
        double off = k < offs.size() ? offs[k] : 0.0;
        double at = Simulator::Now().GetSeconds() + off;
        if (at < end_s && sockets.size() < offs.size() + 1) Simulator::Schedule(Seconds(off), &FetchClient::Open, this);
    }
};

inline Ptr<ExponentialRandomVariable> NewExponential(double mean, int64_t stream) {
    Ptr<ExponentialRandomVariable> e = CreateObject<ExponentialRandomVariable>();
    e->SetAttribute("Mean", DoubleValue(mean));
    e->SetStream(stream);
    return e;
}

// A TCP socket of `node` with a host's settings: every TCP socket of a simulation is made by
// one (Python's _tcp_socket for those made before the run, FetchClient's during it).
struct SocketMaker {
    Ptr<Node> node;
    uint32_t sndbuf = 4194304, rcvbuf = 6291456, initcwnd = 10, segment = 0;
    bool sack = true, nodelay = true;
    int ecn = -1;  // TcpSocketBase::UseEcn: 0 Off, 1 On, 2 AcceptOnly (Linux's tcp_ecn); -1 ns-3's default
    Ptr<Socket> Make() {
        Ptr<Socket> s = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
        if (ecn >= 0) s->SetAttribute("UseEcn", EnumValue<TcpSocketState::UseEcn_t>((TcpSocketState::UseEcn_t)ecn));
        s->SetAttribute("SndBufSize", UintegerValue(sndbuf));
        s->SetAttribute("RcvBufSize", UintegerValue(rcvbuf));
        s->SetAttribute("InitialCwnd", UintegerValue(initcwnd));
        s->SetAttribute("TcpNoDelay", BooleanValue(nodelay));
        s->SetAttribute("Sack", BooleanValue(sack));
        if (segment) s->SetAttribute("SegmentSize", UintegerValue(segment));
        return s;
    }
};

inline void UseSocketMaker(Ptr<FetchClient> client, SocketMaker* maker) {
    client->make_socket = MakeCallback(&SocketMaker::Make, maker);
}

template <class T> Ptr<T> New() { return CreateObject<T>(); }

// Fill a vector from a NumPy array in one call (Python hands over arrays, not elements).
template <class T> void Fill(std::vector<T>& v, const T* p, size_t n) { v.assign(p, p + n); }

// The object behind a Ptr: cppyy sets data members through a Ptr proxy on a copy, not on the
// object, so Python configures and reads tcpdelay's objects through this.
template <class T> T* Raw(Ptr<T> p) { return PeekPointer(p); }

inline void AttachProbeAt(Ptr<TcpStateProbe> probe, Ptr<Socket> s, double period_s, double first_sample_s) {
    probe->Attach(s, period_s, first_sample_s);
}

}  // namespace tcpdelay_sim
