/* What CCP (bpf/cc/ccp.bpf.c) and CCPD (bpf/cc/ccpd.bpf.c) share: the estimators of their
 * control laws and what happens before and on a loss. Cavendish, Kumazoe, Tsuru, Oie
 * and others proposed both ("Capacity and Congestion Probing: TCP Congestion Avoidance via Path
 * Capacity and Storage Estimation", 2010; "TCP Congestion Avoidance using Proportional plus
 * Derivative Control", 2011; papers/003 eqs 5-6); papers/003 does
 * not give the estimators, so these are tcpdelay's readings (docs/congestion-control.md,
 * "CCP and CCPD", with the alternatives as parameters):
 * - RTT_min: the smallest RTT sample of the connection (+1 us, never zero);
 * - x_k, the backlog (packets of this flow queued in the path), from the RTT inflation of the
 *   latest sample as Vegas reads it: x = inflight·(RTT − RTT_min)/RTT;
 * - inflight_k: segments in flight (tcp_packets_in_flight(): out − sacked − lost + retransmitted);
 * - B, the path's storage ("virtual buffer size"): the segments outstanding when a loss was
 *   detected — the largest such value of the connection (param_storage = 0, the default) or the
 *   latest (param_storage = 1). Until the first loss B is unknown and the flow probes as Reno
 *   (slow start, then congestion avoidance).
 * A loss changes no window ("packet loss does not trigger any special cwnd adjustment",
 * papers/003 Sec. II-D): ssthresh returns the window as it is.
 * Published state (tdcc_state): value[0] = x (1/1000 segments), value[1] = B (segments),
 * value[2] = inflight (segments), value[3] = RTT_min (us, 0 before the first sample).
 */
#ifndef TDCC_CCP_H
#define TDCC_CCP_H

#include "tdcc.h"

#define CCP_NO_RTT 0x7fffffff
#define CCP_Q10 1024ULL

struct ccp {
	__u32 rtt_min_us;  /* smallest RTT sample (+1 us) */
	__u32 rtt_last_us; /* latest RTT sample (+1 us), 0 before the first */
	__u32 storage;     /* B, segments; 0 until the first loss */
	__u32 x_q10;       /* x_k, Q10 segments */
	__u32 inflight;    /* inflight_k, segments */
	__u32 prev_sum_q10; /* CCPD: x + inflight at the previous ACK, Q10 */
	__u64 prev_t_us;   /* CCPD: time of the previous ACK (us), 0 before the first */
};

static __always_inline __u32 ccp_packets_in_flight(const struct tcp_sock *tp)
{
	__u32 left = tp->sacked_out + tp->lost_out;
	__u32 out = tp->packets_out > left ? tp->packets_out - left : 0;

	return out + tp->retrans_out;
}

static __always_inline void ccp_publish(struct sock *sk, const struct ccp *c)
{
	tdcc_publish(sk, (__u64)c->x_q10 * 1000 / CCP_Q10, c->storage, c->inflight,
		     c->rtt_min_us == CCP_NO_RTT ? 0 : c->rtt_min_us);
}

static __always_inline void ccp_init_state(struct sock *sk)
{
	struct ccp *c = inet_csk_ca(sk);

	c->rtt_min_us = CCP_NO_RTT;
	c->rtt_last_us = 0;
	c->storage = 0;
	c->x_q10 = 0;
	c->inflight = 0;
	c->prev_sum_q10 = 0;
	c->prev_t_us = 0;
}

static __always_inline void ccp_rtt_sample(struct sock *sk, __s32 rtt_us)
{
	struct ccp *c = inet_csk_ca(sk);
	__u32 vrtt;

	if (rtt_us < 0)
		return;
	vrtt = (__u32)rtt_us + 1;
	if (vrtt < c->rtt_min_us)
		c->rtt_min_us = vrtt;
	c->rtt_last_us = vrtt;
}

/* x_k and inflight_k now. */
static __always_inline void ccp_estimate(struct sock *sk, struct ccp *c)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 rtt = c->rtt_last_us, base = c->rtt_min_us;

	c->inflight = ccp_packets_in_flight(tp);
	if (rtt && base != CCP_NO_RTT && rtt > base)
		c->x_q10 = (__u32)((__u64)c->inflight * (rtt - base) * CCP_Q10 / rtt);
	else
		c->x_q10 = 0;
}

/* A loss was detected: B from the segments outstanding now; no window change. */
static __always_inline __u32 ccp_on_loss(struct sock *sk, __u32 storage_latest)
{
	struct ccp *c = inet_csk_ca(sk);
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 held = tp->packets_out;

	if (storage_latest)
		c->storage = max(held, 2U);
	else
		c->storage = max(c->storage, max(held, 2U));
	ccp_publish(sk, c);
	return max(tp->snd_cwnd, 2U);
}

/* The window a law computed (Q10, already clamped at 0), into snd_cwnd within [2, clamp]. */
static __always_inline void ccp_set_cwnd(struct tcp_sock *tp, __u64 cwnd_q10)
{
	__u64 cwnd = cwnd_q10 / CCP_Q10;

	if (cwnd < 2)
		cwnd = 2;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = (__u32)cwnd;
}

#endif
