// SPDX-License-Identifier: GPL-2.0
/* Compound TCP: Tan, Song, Zhang and Sridharan, "A Compound TCP approach for high-speed and long
 * distance networks" (INFOCOM 2006) and the CTCP Internet-Draft (draft-sridharan-tcpm-ctcp),
 * as Watanabe et al., "Performance Characterization of Streaming Video over TCP Variants"
 * (papers/003 in the project's paper list), eqs 3-4, summarise it. docs/congestion-control.md,
 * "Compound", gives the reading of the garbled equations and the choices.
 *
 * The send window is win = cwnd + dwnd (the kernel's snd_cwnd):
 * - cwnd, the loss-based part: slow start as Reno; in congestion avoidance cwnd += 1/win per
 *   segment acked (eq 3: the increase is spread over the whole window); on a loss cwnd / 2;
 * - dwnd, the delay-based part, once a round (the first ACK beyond the round's snd_nxt) with at
 *   least three RTT samples, outside slow start and only while win >= low_window:
 *   diff = sent·(minRTT − baseRTT)/minRTT (packets this flow keeps queued; sent = the segments
 *   the round carried), then
 *     diff <  gamma: dwnd += max(alpha·B^k − 1, 0), B = win (draft) or dwnd (papers/003 as
 *                   printed: param_grow_with_dwnd = 1),
 *     diff >= gamma: dwnd = max(dwnd − eta·diff, 0);
 *   on a loss dwnd = max(W·(1 − beta) − cwnd/2, 0), W = win (draft) or dwnd (papers/003 as
 *   printed: param_loss_with_dwnd = 1); below low_window dwnd is 0.
 * dwnd is kept in Q10 fixed point (1024 = one segment): alpha·win^k − 1 is below one segment
 * for windows under ~70 (alpha = 1/8), so whole segments would never grow it there.
 * Published state (tdcc_state): value[0] = dwnd (segments), value[1] = diff of the last round
 * (1/1000 segments), value[2] = baseRTT (us, 0 before the first sample), value[3] = cwnd, the
 * loss-based part (segments).
 */
#include "tdcc.h"
#include "fixed_pow.h"

char _license[] SEC("license") = "GPL";

/* Parameters: fractions in Q10 (1024 = 1.0), windows in segments (the draft's defaults). */
const volatile __u32 param_alpha = 128;     /* 1/8: dwnd's growth factor */
const volatile __u32 param_beta = 512;      /* 1/2: dwnd's share of the decrease on loss */
const volatile __u32 param_eta = 1024;      /* 1: dwnd's decrease per queued packet (the draft's zeta) */
const volatile __u32 param_k = 768;         /* 0.75: exponent of the growth */
const volatile __u32 param_gamma = 30;      /* packets queued above which dwnd shrinks */
const volatile __u32 param_low_window = 38; /* dwnd is 0 while win is below it */
const volatile __u32 param_grow_with_dwnd = 0;
const volatile __u32 param_loss_with_dwnd = 0;

#define CTCP_NO_RTT 0x7fffffff
#define Q10 1024U

struct compound {
	__u32 beg_snd_nxt; /* right edge of the current round */
	__u32 beg_snd_una; /* left edge of the current round */
	__u32 min_rtt_us;  /* min RTT sample in the current round (+1 us) */
	__u32 base_rtt_us; /* min RTT sample over the connection (+1 us) */
	__u32 cnt_rtt;     /* RTT samples in the current round */
	__u32 doing_ctcp;  /* 0 while not Open: no dwnd decisions */
	__u32 cwnd;        /* the loss-based window (segments) */
	__u32 cwnd_cnt;    /* segments acked towards the next cwnd increase */
	__u32 dwnd_q10;    /* the delay window, Q10 segments */
	__u32 diff_q10;    /* diff of the last round, Q10 segments */
};

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}
#define after(seq2, seq1) before(seq1, seq2)

static __always_inline void ctcp_publish(struct sock *sk, const struct compound *c)
{
	tdcc_publish(sk, c->dwnd_q10 / Q10, (__u64)c->diff_q10 * 1000 / Q10,
		     c->base_rtt_us == CTCP_NO_RTT ? 0 : c->base_rtt_us, c->cwnd);
}

/* A fresh round: decisions only on a round of fresh samples (after Open, idle, start). */
static __always_inline void ctcp_enable(struct sock *sk)
{
	struct compound *c = inet_csk_ca(sk);
	const struct tcp_sock *tp = tcp_sk(sk);

	c->doing_ctcp = 1;
	c->beg_snd_nxt = tp->snd_nxt;
	c->beg_snd_una = tp->snd_una;
	c->cnt_rtt = 0;
	c->min_rtt_us = CTCP_NO_RTT;
}

/* Bring cwnd and dwnd in line with snd_cwnd when the kernel changed it (end of recovery, undo,
 * a timeout, an idle restart): the delay part stays, the loss part takes the rest. */
static __always_inline void ctcp_sync(struct sock *sk)
{
	struct compound *c = inet_csk_ca(sk);
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 dwnd = c->dwnd_q10 / Q10;

	if (c->cwnd + dwnd == tp->snd_cwnd)
		return;
	if (tp->snd_cwnd > dwnd) {
		c->cwnd = tp->snd_cwnd - dwnd;
	} else {
		c->cwnd = tp->snd_cwnd;
		c->dwnd_q10 = 0;
	}
}

SEC("struct_ops/ctcp_init")
void BPF_PROG(ctcp_init, struct sock *sk)
{
	struct compound *c = inet_csk_ca(sk);

	c->base_rtt_us = CTCP_NO_RTT;
	c->cwnd = tcp_sk(sk)->snd_cwnd;
	c->cwnd_cnt = 0;
	c->dwnd_q10 = 0;
	c->diff_q10 = 0;
	ctcp_enable(sk);
}

SEC("struct_ops/ctcp_pkts_acked")
void BPF_PROG(ctcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct compound *c = inet_csk_ca(sk);
	__s32 rtt_us = sample->rtt_us;
	__u32 vrtt;

	if (rtt_us < 0)
		return;
	vrtt = (__u32)rtt_us + 1; /* never a zero RTT */
	if (vrtt < c->base_rtt_us)
		c->base_rtt_us = vrtt;
	c->min_rtt_us = min(c->min_rtt_us, vrtt);
	c->cnt_rtt++;
}

SEC("struct_ops/ctcp_set_state")
void BPF_PROG(ctcp_set_state, struct sock *sk, __u8 new_state)
{
	struct compound *c = inet_csk_ca(sk);

	if (new_state == TCP_CA_Open)
		ctcp_enable(sk);
	else
		c->doing_ctcp = 0;
}

SEC("struct_ops/ctcp_cwnd_event")
void BPF_PROG(ctcp_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	/* The draft keeps baseRTT across an idle restart; the round starts afresh. */
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START)
		ctcp_enable(sk);
}

/* The once-a-round update of dwnd (eq 4, "AckRec"). */
static __always_inline void ctcp_round(struct sock *sk, struct compound *c)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 rtt = c->min_rtt_us, base = c->base_rtt_us;
	__u32 mss = tp->mss_cache;
	__u32 sent, win;
	__u64 diff;

	if (!mss || rtt == CTCP_NO_RTT || base == CTCP_NO_RTT || rtt < base)
		return;
	sent = (c->beg_snd_nxt - c->beg_snd_una) / mss;
	win = c->cwnd + c->dwnd_q10 / Q10;
	if (!sent || sent > win)
		sent = win;
	diff = (__u64)sent * (rtt - base) * Q10 / rtt;
	c->diff_q10 = (__u32)diff;

	if (win < param_low_window) {
		c->dwnd_q10 = 0;
	} else if (diff < (__u64)param_gamma * Q10) {
		__u32 basis = param_grow_with_dwnd ? c->dwnd_q10 / Q10 : win;
		__u64 grow = fp_pow_q10(basis, param_k) * param_alpha / Q10;

		if (grow > Q10)
			c->dwnd_q10 += (__u32)(grow - Q10);
	} else {
		__u64 shrink = diff * param_eta / Q10;

		c->dwnd_q10 = c->dwnd_q10 > shrink ? c->dwnd_q10 - (__u32)shrink : 0;
	}
}

SEC("struct_ops/ctcp_cong_avoid")
void BPF_PROG(ctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct compound *c = inet_csk_ca(sk);
	__u32 win;

	ctcp_sync(sk);

	if (tcp_is_cwnd_limited(sk)) {
		if (tcp_in_slow_start(tp)) {
			tcp_slow_start(tp, acked);
			ctcp_sync(sk);
		} else {
			/* eq 3: cwnd += 1/(cwnd + dwnd) per segment acked */
			win = c->cwnd + c->dwnd_q10 / Q10;
			c->cwnd_cnt += acked;
			if (c->cwnd_cnt >= win) {
				c->cwnd_cnt = 0;
				c->cwnd++;
			}
		}
	}

	if (after(ack, c->beg_snd_nxt)) {
		if (c->doing_ctcp && c->cnt_rtt > 2 && !tcp_in_slow_start(tp))
			ctcp_round(sk, c);
		c->beg_snd_una = c->beg_snd_nxt;
		c->beg_snd_nxt = tp->snd_nxt;
		c->cnt_rtt = 0;
		c->min_rtt_us = CTCP_NO_RTT;
		ctcp_publish(sk, c);
	}

	if (!tcp_in_slow_start(tp)) {
		win = c->cwnd + c->dwnd_q10 / Q10;
		if (win > tp->snd_cwnd_clamp) {
			win = tp->snd_cwnd_clamp;
			if (c->cwnd > win)
				c->cwnd = win;
			c->dwnd_q10 = (win - c->cwnd) * Q10;
		}
		tp->snd_cwnd = max(win, 2U);
	}
}

/* On a loss (eq 3 and 4, "PktLoss"): cwnd / 2 and dwnd = max(W·(1 − beta) − cwnd/2, 0); the
 * kernel brings snd_cwnd down to what this returns over the recovery (PRR). */
SEC("struct_ops/ctcp_ssthresh")
__u32 BPF_PROG(ctcp_ssthresh, struct sock *sk)
{
	struct compound *c = inet_csk_ca(sk);
	__u64 w, keep, half_q10;
	__u32 half;

	ctcp_sync(sk);
	w = param_loss_with_dwnd ? c->dwnd_q10 : (__u64)tcp_sk(sk)->snd_cwnd * Q10;
	keep = w * (Q10 - min(param_beta, Q10)) / Q10;
	half = c->cwnd / 2;
	half_q10 = (__u64)half * Q10;
	c->dwnd_q10 = keep > half_q10 ? (__u32)(keep - half_q10) : 0;
	c->cwnd = max(half, 2U);
	c->cwnd_cnt = 0;
	ctcp_publish(sk, c);
	return max(c->cwnd + c->dwnd_q10 / Q10, 2U);
}

SEC("struct_ops/ctcp_undo_cwnd")
__u32 BPF_PROG(ctcp_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops compound = {
	.init = (void *)ctcp_init,
	.ssthresh = (void *)ctcp_ssthresh,
	.undo_cwnd = (void *)ctcp_undo_cwnd,
	.cong_avoid = (void *)ctcp_cong_avoid,
	.pkts_acked = (void *)ctcp_pkts_acked,
	.set_state = (void *)ctcp_set_state,
	.cwnd_event = (void *)ctcp_cwnd_event,
	.name = TDCC_NAME,
};
