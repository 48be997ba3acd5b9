// SPDX-License-Identifier: GPL-2.0
/* TCP Vegas: Brakmo and Peterson, "TCP Vegas: End to End Congestion Avoidance on a Global
 * Internet", IEEE JSAC 13(8), 1995 — as Linux's net/ipv4/tcp_vegas.c implements it
 * (docs/congestion-control.md, "Vegas"):
 * - RTT samples (pkts_acked): baseRTT = min over the connection, minRTT = min over the current
 *   round, cntRTT = samples in the round; every sample is rtt_us + 1 (never zero);
 * - once per round (the first ACK beyond the snd_nxt recorded at the round's start), with at
 *   least three samples: diff = cwnd·(minRTT − baseRTT)/baseRTT segments (Linux divides by
 *   baseRTT; the paper's Diff divides by RTT: param_diff_by_rtt = 1 selects it);
 *   slow start: diff > gamma → cwnd = min(cwnd, cwnd·baseRTT/minRTT + 1), leave slow start;
 *   congestion avoidance: diff > beta → cwnd − 1; diff < alpha → cwnd + 1; cwnd within
 *   [2, snd_cwnd_clamp];
 * - fewer samples, or while not in the Open state (recovery, loss, CWR): Reno;
 * - Vegas restarts (forgets the round) on entering Open, on an idle restart and on the first
 *   transmission; loss recovery and ssthresh on loss are Linux's (Reno).
 * Published state (tdcc_state): value[0] = diff of the last Vegas round (segments),
 * value[1] = baseRTT (us, 0 before the first sample), value[2] = minRTT of the last completed
 * round (us, 0 if the round had no sample), value[3] = cntRTT of that round.
 */
#include "tdcc.h"

char _license[] SEC("license") = "GPL";

/* Parameters, in segments (Linux's module parameters and defaults). */
const volatile __u32 param_alpha = 2; /* lower bound of segments queued */
const volatile __u32 param_beta = 4;  /* upper bound of segments queued */
const volatile __u32 param_gamma = 1; /* slow start ends when diff exceeds it */
/* 0: diff = cwnd·(RTT − baseRTT)/baseRTT as Linux; 1: cwnd·(RTT − baseRTT)/RTT, the paper's
 * (Expected − Actual)·baseRTT. */
const volatile __u32 param_diff_by_rtt = 0;

#define VEGAS_NO_RTT 0x7fffffff

struct vegas {
	__u32 beg_snd_nxt;     /* right edge of the current round */
	__u32 min_rtt_us;      /* min RTT sample in the current round (+1 us) */
	__u32 base_rtt_us;     /* min RTT sample over the connection (+1 us) */
	__u32 cnt_rtt;         /* RTT samples in the current round */
	__u32 doing_vegas_now; /* 0 while not Open: behave as Reno */
	__u32 last_diff;       /* diff of the last Vegas round, for tdcc_state */
};

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}
#define after(seq2, seq1) before(seq1, seq2)

static __always_inline __u8 ca_state(const struct sock *sk)
{
	return (__u8)BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state);
}

/* include/net/tcp.h tcp_current_ssthresh(): ssthresh, or 3/4 cwnd if larger, outside a cwnd
 * reduction. */
static __always_inline __u32 tcp_current_ssthresh(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	__u8 state = ca_state(sk);

	if (state == TCP_CA_CWR || state == TCP_CA_Recovery)
		return tp->snd_ssthresh;
	return max(tp->snd_ssthresh, (tp->snd_cwnd >> 1) + (tp->snd_cwnd >> 2));
}

static __always_inline void vegas_publish(struct sock *sk, const struct vegas *v, __u32 round_min_rtt_us,
					  __u32 round_cnt)
{
	tdcc_publish(sk, v->last_diff, v->base_rtt_us == VEGAS_NO_RTT ? 0 : v->base_rtt_us,
		     round_min_rtt_us == VEGAS_NO_RTT ? 0 : round_min_rtt_us, round_cnt);
}

/* Start a fresh round: Vegas decides only after a whole round of fresh samples. */
static __always_inline void vegas_enable(struct sock *sk)
{
	struct vegas *v = inet_csk_ca(sk);

	v->doing_vegas_now = 1;
	v->beg_snd_nxt = tcp_sk(sk)->snd_nxt;
	v->cnt_rtt = 0;
	v->min_rtt_us = VEGAS_NO_RTT;
}

static __always_inline void vegas_reset(struct sock *sk)
{
	struct vegas *v = inet_csk_ca(sk);

	v->base_rtt_us = VEGAS_NO_RTT;
	v->last_diff = 0;
	vegas_enable(sk);
}

SEC("struct_ops/vegas_init")
void BPF_PROG(vegas_init, struct sock *sk)
{
	vegas_reset(sk);
}

SEC("struct_ops/vegas_pkts_acked")
void BPF_PROG(vegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct vegas *v = inet_csk_ca(sk);
	__s32 rtt_us = sample->rtt_us;
	__u32 vrtt;

	if (rtt_us < 0)
		return;
	vrtt = (__u32)rtt_us + 1; /* never a zero RTT */
	if (vrtt < v->base_rtt_us)
		v->base_rtt_us = vrtt;
	v->min_rtt_us = min(v->min_rtt_us, vrtt);
	v->cnt_rtt++;
}

SEC("struct_ops/vegas_set_state")
void BPF_PROG(vegas_set_state, struct sock *sk, __u8 new_state)
{
	struct vegas *v = inet_csk_ca(sk);

	if (new_state == TCP_CA_Open)
		vegas_enable(sk);
	else
		v->doing_vegas_now = 0;
}

SEC("struct_ops/vegas_cwnd_event")
void BPF_PROG(vegas_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	/* Linux re-initialises Vegas (baseRTT included) on these two events. */
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START)
		vegas_reset(sk);
}

SEC("struct_ops/vegas_cong_avoid")
void BPF_PROG(vegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct vegas *v = inet_csk_ca(sk);

	if (!v->doing_vegas_now) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}

	if (after(ack, v->beg_snd_nxt)) {
		/* Once per round: the round that just ended decides. */
		__u32 round_min_rtt = v->min_rtt_us;
		__u32 round_cnt = v->cnt_rtt;

		v->beg_snd_nxt = tp->snd_nxt;

		if (v->cnt_rtt <= 2) {
			/* Two samples or fewer: likely only delayed ACKs, behave as Reno. */
			tcp_reno_cong_avoid(sk, ack, acked);
		} else {
			__u32 rtt = v->min_rtt_us;
			__u32 base = v->base_rtt_us;
			__u32 cwnd = tp->snd_cwnd;
			__u64 target_cwnd = (__u64)cwnd * base / rtt;
			__u32 diff;

			if (param_diff_by_rtt)
				diff = (__u32)((__u64)cwnd * (rtt - base) / rtt);
			else
				diff = (__u32)((__u64)cwnd * (rtt - base) / base);
			v->last_diff = diff;

			if (diff > param_gamma && tcp_in_slow_start(tp)) {
				/* Too fast: match the actual rate (+1 for the truncation) and
				 * leave slow start. */
				tp->snd_cwnd = min(tp->snd_cwnd, (__u32)target_cwnd + 1);
				tp->snd_ssthresh = min(tp->snd_ssthresh, tp->snd_cwnd);
			} else if (tcp_in_slow_start(tp)) {
				tcp_slow_start(tp, acked);
			} else if (diff > param_beta) {
				tp->snd_cwnd = tp->snd_cwnd - 1;
				tp->snd_ssthresh = min(tp->snd_ssthresh, tp->snd_cwnd);
			} else if (diff < param_alpha) {
				tp->snd_cwnd = tp->snd_cwnd + 1;
			}

			if (tp->snd_cwnd < 2)
				tp->snd_cwnd = 2;
			else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
				tp->snd_cwnd = tp->snd_cwnd_clamp;

			tp->snd_ssthresh = tcp_current_ssthresh(sk);
		}

		v->cnt_rtt = 0;
		v->min_rtt_us = VEGAS_NO_RTT;
		vegas_publish(sk, v, round_min_rtt, round_cnt);
	} else if (tcp_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
	}
}

SEC("struct_ops/vegas_ssthresh")
__u32 BPF_PROG(vegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/vegas_undo_cwnd")
__u32 BPF_PROG(vegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops vegas = {
	.init = (void *)vegas_init,
	.ssthresh = (void *)vegas_ssthresh,
	.undo_cwnd = (void *)vegas_undo_cwnd,
	.cong_avoid = (void *)vegas_cong_avoid,
	.pkts_acked = (void *)vegas_pkts_acked,
	.set_state = (void *)vegas_set_state,
	.cwnd_event = (void *)vegas_cwnd_event,
	.name = TDCC_NAME,
};
