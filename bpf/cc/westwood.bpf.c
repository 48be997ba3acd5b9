// SPDX-License-Identifier: GPL-2.0
/* TCP Westwood: Mascolo, Casetti, Gerla, Sanadidi, Wang, "TCP Westwood: Bandwidth Estimation
 * for Enhanced Transport over Wireless Links", ACM MobiCom 2001 (docs/congestion-control.md):
 * - one bandwidth sample per ACK: b_k = d_k/(t_k − t_{k−1}), d_k the bytes the ACK reports
 *   delivered (duplicate ACKs count one segment, westwood.h), t the ACK's arrival time;
 * - the paper's discrete low-pass filter (a first-order filter with cut-off 1/tau discretised
 *   with Tustin's approximation), with Δ_k = t_k − t_{k−1}:
 *     bwe_k = α_k·bwe_{k−1} + (1 − α_k)·(b_k + b_{k−1})/2,  α_k = (2τ − Δ_k)/(2τ + Δ_k),
 *   evaluated exactly in integers as
 *     bwe_k = [(2τ − Δ_k)·bwe_{k−1} + Δ_k·(b_k + b_{k−1})] / (2τ + Δ_k)   (τ, Δ in us; b in B/s);
 * - when more than τ/m passes without an ACK, the filter takes a virtual null sample (b = 0)
 *   every τ/m (BPF has no timer here: inserted when the next ACK arrives or ssthresh is
 *   taken);
 * - probing as Reno; after three duplicate ACKs ssthresh = max(BWE·RTT_min/MSS, 2) and
 *   cwnd = ssthresh if larger (applied when Linux's recovery ends); after a timeout the same
 *   ssthresh and cwnd = 1 (Linux's loss state does that). RTT_min: min RTT sample of the
 *   connection.
 * Published state (tdcc_state): value[0] = BWE (bytes/s), value[1] = RTT_min (us, 0 before a
 * sample), value[2] = the last per-ACK sample b_k (bytes/s), value[3] = 0.
 */
#include "westwood.h"

char _license[] SEC("license") = "GPL";

const volatile __u32 param_tau_ms = 500; /* filter time constant τ (cut-off 1/τ), ms, 1..10000 */
const volatile __u32 param_m = 2;        /* a virtual null sample every τ/m without ACKs (m ≥ 2) */

#define MAX_VIRTUAL_SAMPLES 32
#define MAX_TAU_MS 10000
#define MAX_SAMPLE_BYTES_PER_S (1ULL << 38) /* 2.2 Tb/s: with tau <= 10 s the filter's products stay in 64 bits */

struct westwood {
	__u64 bwe;          /* filtered estimate bwe_{k-1}, bytes/s */
	__u64 last_sample;  /* b_{k-1}, bytes/s */
	__u64 last_ack_us;  /* t_{k-1}: the last real ACK, tcp_mstamp */
	__u64 last_step_us; /* time of the last filter step (real or virtual) */
	__u32 pending;      /* bytes of ACKs that arrived at the same microsecond */
	__u32 snd_una;
	__u32 accounted;
	__u32 rtt_min_us;   /* 0: no sample yet */
	__u8 started;       /* the first ACK sets t_0 */
};

static __always_inline __u64 tau_us(void)
{
	__u32 tau_ms = param_tau_ms;

	if (tau_ms == 0)
		tau_ms = 1;
	if (tau_ms > MAX_TAU_MS)
		tau_ms = MAX_TAU_MS;
	return (__u64)tau_ms * 1000;
}

/* One filter step of length dt_us with sample b (bytes/s). */
static __always_inline void filter_step(struct westwood *w, __u64 dt_us, __u64 b)
{
	__u64 two_tau = 2 * tau_us();

	if (dt_us >= two_tau) /* α ≤ 0: the pair average alone */
		w->bwe = (b + w->last_sample) / 2;
	else
		w->bwe = ((two_tau - dt_us) * w->bwe + dt_us * (b + w->last_sample)) / (two_tau + dt_us);
	w->last_sample = b;
	w->last_step_us += dt_us;
}

SEC("struct_ops/westwood_init")
void BPF_PROG(westwood_init, struct sock *sk)
{
	struct westwood *w = inet_csk_ca(sk);

	w->bwe = 0;
	w->last_sample = 0;
	w->pending = 0;
	w->accounted = 0;
	w->rtt_min_us = 0;
	w->started = 0;
	w->snd_una = tcp_sk(sk)->snd_una;
}

/* Virtual null samples every τ/m strictly before now, i.e. what a timer-driven filter would
 * have done since the last step (the paper's Nyquist rule); called at each ACK and before
 * ssthresh is taken, so a timeout sees the estimate decayed as the paper's would be. */
static __always_inline void westwood_catch_up(struct westwood *w, __u64 now)
{
	__u64 step = tau_us() / max(param_m, 2U);
	__u64 gap, n;
	int i;

	if (step == 0)
		step = 1;
	gap = now > w->last_step_us ? now - w->last_step_us : 0;
	n = gap ? (gap - 1) / step : 0;
	for (i = 0; i < MAX_VIRTUAL_SAMPLES; i++) {
		if (i >= n)
			break;
		filter_step(w, step, 0);
	}
	if (n > MAX_VIRTUAL_SAMPLES) {
		/* α^32 ≤ 0.6^32 for m = 2: what is left is below one byte per second */
		w->bwe = 0;
		w->last_sample = 0;
		w->last_step_us = now - (gap - 1) % step - 1;
	}
}

SEC("struct_ops/westwood_in_ack_event")
void BPF_PROG(westwood_in_ack_event, struct sock *sk, __u32 ack_flags)
{
	struct westwood *w = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 now = tp->tcp_mstamp;
	__u64 dt, b;
	__u32 d;

	if (!w->started) {
		/* t_0: the first ACK starts the clock and where counting starts */
		w->started = 1;
		w->snd_una = tp->snd_una;
		w->last_ack_us = now;
		w->last_step_us = now;
		return;
	}
	d = westwood_acked_count(tp, &w->snd_una, &w->accounted);
	westwood_catch_up(w, now);

	dt = now - w->last_ack_us;
	if (dt == 0) {
		/* same timestamp as the previous ACK: one sample with the next */
		w->pending += d;
		return;
	}
	b = (__u64)(d + w->pending) * USEC_PER_SEC / dt;
	if (b > MAX_SAMPLE_BYTES_PER_S)
		b = MAX_SAMPLE_BYTES_PER_S;
	w->pending = 0;
	w->last_ack_us = now;
	filter_step(w, now - w->last_step_us, b);
	w->last_step_us = now;
	tdcc_publish(sk, w->bwe, w->rtt_min_us, b, 0);
}

SEC("struct_ops/westwood_pkts_acked")
void BPF_PROG(westwood_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct westwood *w = inet_csk_ca(sk);
	__s32 rtt_us = sample->rtt_us;

	if (rtt_us > 0 && (w->rtt_min_us == 0 || (__u32)rtt_us < w->rtt_min_us))
		w->rtt_min_us = rtt_us;
}

/* Entering recovery (three duplicate ACKs), an ECN CWR or the loss state (a timeout):
 * ssthresh = BWE·RTT_min/MSS (at least 2). Without an RTT sample yet, Reno's. */
SEC("struct_ops/westwood_ssthresh")
__u32 BPF_PROG(westwood_ssthresh, struct sock *sk)
{
	struct westwood *w = inet_csk_ca(sk);

	if (w->started)
		westwood_catch_up(w, tcp_sk(sk)->tcp_mstamp);
	if (!w->rtt_min_us || !w->bwe)
		return tcp_reno_ssthresh(sk);
	return westwood_bw_rttmin(tcp_sk(sk), w->bwe, w->rtt_min_us);
}

SEC("struct_ops/westwood_cwnd_event")
void BPF_PROG(westwood_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = tcp_sk(sk);

	/* Recovery ended: Linux set cwnd = ssthresh; the paper sets cwnd = ssthresh only when
	 * cwnd (the window when the loss was detected) is larger. */
	if (event == CA_EVENT_COMPLETE_CWR && tp->prior_cwnd >= 2 && tp->snd_cwnd > tp->prior_cwnd)
		tp->snd_cwnd = tp->prior_cwnd;
}

SEC("struct_ops/westwood_cong_avoid")
void BPF_PROG(westwood_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/westwood_undo_cwnd")
__u32 BPF_PROG(westwood_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops westwood = {
	.init = (void *)westwood_init,
	.ssthresh = (void *)westwood_ssthresh,
	.cong_avoid = (void *)westwood_cong_avoid,
	.undo_cwnd = (void *)westwood_undo_cwnd,
	.cwnd_event = (void *)westwood_cwnd_event,
	.in_ack_event = (void *)westwood_in_ack_event,
	.pkts_acked = (void *)westwood_pkts_acked,
	.name = TDCC_NAME,
};
