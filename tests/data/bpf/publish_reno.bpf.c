// SPDX-License-Identifier: GPL-2.0
/* Test-only congestion control (tests/transport/test_cc_state.py): Reno that publishes
 * value[0] = snd_cwnd (segments) and value[1] = how many times cong_avoid ran, into the
 * tdcc_state socket-storage map of bpf/cc/tdcc.h, so the sampler's cc_state columns can be
 * checked against something the kernel also reports (TCP_INFO's cwnd). Its own kernel name. */
#include "tdcc.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops/tdcct_pub_cong_avoid")
void BPF_PROG(tdcct_pub_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tdcc_state *st;

	tcp_reno_cong_avoid(sk, ack, acked);
	st = bpf_sk_storage_get(&tdcc_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	st->value[0] = tcp_sk(sk)->snd_cwnd;
	st->value[1] += 1;
	st->value[2] = 7;
	st->value[3] = 0xffffffffffffffffULL;
}

SEC("struct_ops/tdcct_pub_ssthresh")
__u32 BPF_PROG(tdcct_pub_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/tdcct_pub_undo_cwnd")
__u32 BPF_PROG(tdcct_pub_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops tdcct_publish = {
	.cong_avoid = (void *)tdcct_pub_cong_avoid,
	.ssthresh = (void *)tdcct_pub_ssthresh,
	.undo_cwnd = (void *)tdcct_pub_undo_cwnd,
	.name = "tdcct_publish",
};
