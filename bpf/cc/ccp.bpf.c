// SPDX-License-Identifier: GPL-2.0
/* CCP, Capacity and Congestion Probing TCP: Cavendish, Kumazoe, Tsuru, Oie and Gerla
 * (2010), as papers/003 (Watanabe et al., "Performance Characterization of Streaming Video
 * over TCP Variants") eq 5 gives its law, read as
 *     cwnd_k = [Kp·(B − x_k) − inflight_k] / 2,    Kp >= 0,
 * evaluated on every ACK once B is known (a proportional controller: with inflight_k about the
 * previous window, the window oscillates, damped by the factor −1/2 an ACK, towards
 * Kp·(B − x)/3). The estimators, what happens before the first loss and on a loss are in
 * ccp.h. docs/congestion-control.md, "CCP and CCPD", gives the reading and the choices.
 */
#include "ccp.h"

char _license[] SEC("license") = "GPL";

const volatile __u32 param_kp = 1024;   /* Kp, Q10 (1024 = 1.0); papers/003 runs CCP(1) */
const volatile __u32 param_storage = 0; /* B: 0 = largest outstanding at a loss, 1 = latest */

SEC("struct_ops/ccp_init")
void BPF_PROG(ccp_init, struct sock *sk)
{
	ccp_init_state(sk);
}

SEC("struct_ops/ccp_pkts_acked")
void BPF_PROG(ccp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	ccp_rtt_sample(sk, sample->rtt_us);
}

SEC("struct_ops/ccp_cong_avoid")
void BPF_PROG(ccp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct ccp *c = inet_csk_ca(sk);
	__u64 target, pterm, inflight_q10;

	ccp_estimate(sk, c);
	if (!c->storage) {
		/* B unknown until the first loss: probe as Reno */
		tcp_reno_cong_avoid(sk, ack, acked);
		ccp_publish(sk, c);
		return;
	}
	target = (__u64)c->storage * CCP_Q10;
	pterm = target > c->x_q10 ? (target - c->x_q10) * param_kp / CCP_Q10 : 0;
	inflight_q10 = (__u64)c->inflight * CCP_Q10;
	ccp_set_cwnd(tp, pterm > inflight_q10 ? (pterm - inflight_q10) / 2 : 0);
	ccp_publish(sk, c);
}

SEC("struct_ops/ccp_ssthresh")
__u32 BPF_PROG(ccp_ssthresh, struct sock *sk)
{
	return ccp_on_loss(sk, param_storage);
}

SEC("struct_ops/ccp_undo_cwnd")
__u32 BPF_PROG(ccp_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops ccp = {
	.init = (void *)ccp_init,
	.ssthresh = (void *)ccp_ssthresh,
	.undo_cwnd = (void *)ccp_undo_cwnd,
	.cong_avoid = (void *)ccp_cong_avoid,
	.pkts_acked = (void *)ccp_pkts_acked,
	.name = TDCC_NAME,
};
