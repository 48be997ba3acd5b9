// SPDX-License-Identifier: GPL-2.0
/* TCP Westwood+: Grieco and Mascolo, "Performance Evaluation and Comparison of Westwood+, New
 * Reno, and Vegas TCP Congestion Control", ACM SIGCOMM CCR 34(2), 2004 — as Linux's
 * net/ipv4/tcp_westwood.c implements it (that file is Westwood+; docs/congestion-control.md):
 * - bytes acknowledged are summed over a window of max(RTT, 50 ms); at its end one sample
 *   b = bytes/window and two 7/8 EWMAs: bw_ns = (7·bw_ns + b)/8, bw = (7·bw + bw_ns)/8 (the
 *   first sample fills both);
 * - RTT = the last sample, RTT_min = min over RTT (restarted after a timeout);
 * - probing as Reno; entering recovery ssthresh = cwnd/2 (Reno) and at its end (and at the end
 *   of an ECN CWR) cwnd = ssthresh = max(bw·RTT_min/MSS, 2); after a timeout ssthresh =
 *   max(bw·RTT_min/MSS, 2).
 * Units: Linux counts time in jiffies (bw in bytes per jiffy); this port in microseconds from
 * tp->tcp_mstamp, bw in bytes per second (Linux's value × HZ, without its truncation to whole
 * bytes per jiffy).
 * Published state (tdcc_state): value[0] = bw estimate (bytes/s), value[1] = RTT_min (us),
 * value[2] = the last bandwidth sample (bytes/s), value[3] = 0.
 */
#include "westwood.h"

char _license[] SEC("license") = "GPL";

/* Shortest bandwidth-sample window (Linux: TCP_WESTWOOD_RTT_MIN = HZ/20 = 50 ms). */
const volatile __u32 param_min_window_us = 50000;

#define WESTWOOD_INIT_RTT_US (20 * 1000000U) /* Linux TCP_WESTWOOD_INIT_RTT = 20 s */

struct westwood_plus {
	__u64 bw_ns_est;   /* first EWMA stage, bytes/s */
	__u64 bw_est;      /* bandwidth estimate, bytes/s */
	__u64 last_sample; /* last window's bytes/window, bytes/s */
	__u64 rtt_win_sx;  /* start of the current window, tcp_mstamp (us) */
	__u32 bk;          /* bytes acknowledged in the current window */
	__u32 snd_una;     /* snd_una at the previous ACK */
	__u32 accounted;   /* bytes counted for duplicate ACKs, not yet cumulatively acked */
	__u32 rtt_us;      /* last RTT sample */
	__u32 rtt_min_us;  /* min RTT */
	__u8 first_ack;
	__u8 reset_rtt_min;
};

static __always_inline __u64 ewma_7_8(__u64 old, __u64 sample)
{
	return (7 * old + sample) >> 3;
}

SEC("struct_ops/wwp_init")
void BPF_PROG(wwp_init, struct sock *sk)
{
	struct westwood_plus *w = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	w->bk = 0;
	w->bw_ns_est = 0;
	w->bw_est = 0;
	w->last_sample = 0;
	w->accounted = 0;
	w->reset_rtt_min = 1;
	w->rtt_min_us = WESTWOOD_INIT_RTT_US;
	w->rtt_us = WESTWOOD_INIT_RTT_US;
	w->rtt_win_sx = tp->tcp_mstamp;
	w->snd_una = tp->snd_una;
	w->first_ack = 1;
}

static __always_inline void westwood_filter(struct westwood_plus *w, __u64 delta_us)
{
	__u64 sample = (__u64)w->bk * USEC_PER_SEC / delta_us;

	w->last_sample = sample;
	if (w->bw_ns_est == 0 && w->bw_est == 0) {
		w->bw_ns_est = sample;
		w->bw_est = sample;
	} else {
		w->bw_ns_est = ewma_7_8(w->bw_ns_est, sample);
		w->bw_est = ewma_7_8(w->bw_est, w->bw_ns_est);
	}
}

/* Close the window (one sample) once more than max(RTT, min window) has passed. */
static __always_inline void westwood_update_window(struct sock *sk, struct westwood_plus *w)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 now = tp->tcp_mstamp;
	__u64 delta = now - w->rtt_win_sx;

	if (w->first_ack) {
		/* the first ACK only sets where counting starts */
		w->snd_una = tp->snd_una;
		w->first_ack = 0;
	}
	if (w->rtt_us && delta > max((__u64)w->rtt_us, (__u64)param_min_window_us)) {
		westwood_filter(w, delta);
		w->bk = 0;
		w->rtt_win_sx = now;
	}
}

static __always_inline void update_rtt_min(struct westwood_plus *w)
{
	if (w->reset_rtt_min) {
		w->rtt_min_us = w->rtt_us;
		w->reset_rtt_min = 0;
	} else {
		w->rtt_min_us = min(w->rtt_us, w->rtt_min_us);
	}
}

SEC("struct_ops/wwp_in_ack_event")
void BPF_PROG(wwp_in_ack_event, struct sock *sk, __u32 ack_flags)
{
	struct westwood_plus *w = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	westwood_update_window(sk, w);
	if (ack_flags & CA_ACK_SLOWPATH) {
		w->bk += westwood_acked_count(tp, &w->snd_una, &w->accounted);
	} else {
		/* fast path: an in-order ACK that advanced snd_una */
		w->bk += tp->snd_una - w->snd_una;
		w->snd_una = tp->snd_una;
	}
	update_rtt_min(w);
	tdcc_publish(sk, w->bw_est, w->rtt_min_us, w->last_sample, 0);
}

SEC("struct_ops/wwp_pkts_acked")
void BPF_PROG(wwp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct westwood_plus *w = inet_csk_ca(sk);

	if (sample->rtt_us > 0)
		w->rtt_us = sample->rtt_us;
}

SEC("struct_ops/wwp_cwnd_event")
void BPF_PROG(wwp_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct westwood_plus *w = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	if (event == CA_EVENT_COMPLETE_CWR) {
		tp->snd_ssthresh = westwood_bw_rttmin(tp, w->bw_est, w->rtt_min_us);
		tp->snd_cwnd = tp->snd_ssthresh;
	} else if (event == CA_EVENT_LOSS) {
		tp->snd_ssthresh = westwood_bw_rttmin(tp, w->bw_est, w->rtt_min_us);
		w->reset_rtt_min = 1; /* RTT_min from the next sample on */
	}
}

SEC("struct_ops/wwp_ssthresh")
__u32 BPF_PROG(wwp_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/wwp_cong_avoid")
void BPF_PROG(wwp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/wwp_undo_cwnd")
__u32 BPF_PROG(wwp_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops westwoodplus = {
	.init = (void *)wwp_init,
	.ssthresh = (void *)wwp_ssthresh,
	.cong_avoid = (void *)wwp_cong_avoid,
	.undo_cwnd = (void *)wwp_undo_cwnd,
	.cwnd_event = (void *)wwp_cwnd_event,
	.in_ack_event = (void *)wwp_in_ack_event,
	.pkts_acked = (void *)wwp_pkts_acked,
	.name = TDCC_NAME,
};
