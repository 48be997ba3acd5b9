// SPDX-License-Identifier: GPL-2.0
/* CCPD, Capacity and Congestion Plus Derivative TCP: Cavendish, Kuwahara, Kumazoe, Tsuru
 * and Oie (2011), as papers/003 (Watanabe et al., "Performance Characterization of Streaming
 * Video over TCP Variants") eq 6
 * gives its law, read as
 *     cwnd_k = Kp·[B − x_k − inflight_k]
 *            + Kd/(t_k − t_{k−1}) · [(x_{k−1} + inflight_{k−1}) − (x_k + inflight_k)],
 * a proportional term plus the derivative of backlog-plus-inflight between two successive ACKs
 * at times t_k, evaluated on every ACK once B is known. The unit of t is not in the paper: here
 * it is param_time_unit_us microseconds (default 1, so the paper's Kd = 2000 is a derivative
 * horizon of 2 ms; docs/congestion-control.md, "CCP and CCPD", says why). The difference is
 * taken against the last reference point at least param_min_dt_us old (default 1000 us): ACKs
 * that arrive together (delayed ACKs, GRO, ACK compression) would otherwise make t_k − t_{k−1}
 * a few microseconds and the term thousands of segments. The estimators, what happens before
 * the first loss and on a loss are in ccp.h.
 */
#include "ccp.h"

char _license[] SEC("license") = "GPL";

const volatile __u32 param_kp = 1024;        /* Kp, Q10 (1024 = 1.0) */
const volatile __u32 param_kd = 2000;        /* Kd, in time units; papers/003 runs 2000 and 4000 */
const volatile __u32 param_time_unit_us = 1; /* the unit of t_k */
const volatile __u32 param_min_dt_us = 1000; /* shortest interval of the difference quotient */
const volatile __u32 param_storage = 0;      /* B: 0 = largest outstanding at a loss, 1 = latest */

SEC("struct_ops/ccpd_init")
void BPF_PROG(ccpd_init, struct sock *sk)
{
	ccp_init_state(sk);
}

SEC("struct_ops/ccpd_pkts_acked")
void BPF_PROG(ccpd_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	ccp_rtt_sample(sk, sample->rtt_us);
}

SEC("struct_ops/ccpd_cong_avoid")
void BPF_PROG(ccpd_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp *c = inet_csk_ca(sk);
	__u64 now_us = tp->tcp_mstamp;
	__u64 held_q10, storage_q10, mag, dt_units;
	__s64 cwnd_q10;
	__u32 sum_q10;

	ccp_estimate(sk, c);
	held_q10 = c->x_q10 + (__u64)c->inflight * CCP_Q10;
	sum_q10 = (__u32)held_q10;
	if (!c->storage) {
		/* B unknown until the first loss: probe as Reno */
		tcp_reno_cong_avoid(sk, ack, acked);
		goto out;
	}

	/* Kp·[B − x − inflight] (may be negative) */
	storage_q10 = (__u64)c->storage * CCP_Q10;
	if (storage_q10 >= held_q10)
		cwnd_q10 = (__s64)((storage_q10 - held_q10) * param_kp / CCP_Q10);
	else
		cwnd_q10 = -(__s64)((held_q10 - storage_q10) * param_kp / CCP_Q10);

	/* + Kd/(t_k − t_{k−1})·[(x + inflight)_{k−1} − (x + inflight)_k] */
	if (c->prev_t_us && now_us >= c->prev_t_us) {
		dt_units = max(now_us - c->prev_t_us, (__u64)param_min_dt_us) / max(param_time_unit_us, 1U);
		if (!dt_units)
			dt_units = 1;
		if (c->prev_sum_q10 >= sum_q10) {
			mag = (__u64)(c->prev_sum_q10 - sum_q10) * param_kd / dt_units;
			cwnd_q10 += (__s64)mag;
		} else {
			mag = (__u64)(sum_q10 - c->prev_sum_q10) * param_kd / dt_units;
			cwnd_q10 -= (__s64)mag;
		}
	}
	ccp_set_cwnd(tp, cwnd_q10 > 0 ? (__u64)cwnd_q10 : 0);
out:
	if (!c->prev_t_us || now_us < c->prev_t_us || now_us - c->prev_t_us >= param_min_dt_us) {
		c->prev_sum_q10 = sum_q10;
		c->prev_t_us = now_us;
	}
	ccp_publish(sk, c);
}

SEC("struct_ops/ccpd_ssthresh")
__u32 BPF_PROG(ccpd_ssthresh, struct sock *sk)
{
	return ccp_on_loss(sk, param_storage);
}

SEC("struct_ops/ccpd_undo_cwnd")
__u32 BPF_PROG(ccpd_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops ccpd = {
	.init = (void *)ccpd_init,
	.ssthresh = (void *)ccpd_ssthresh,
	.undo_cwnd = (void *)ccpd_undo_cwnd,
	.cong_avoid = (void *)ccpd_cong_avoid,
	.pkts_acked = (void *)ccpd_pkts_acked,
	.name = TDCC_NAME,
};
