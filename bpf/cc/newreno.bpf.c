// SPDX-License-Identifier: GPL-2.0
/* NewReno as Linux's tcp_cong.c implements it (RFC 5681 slow start and congestion avoidance,
 * RFC 6582 recovery is the kernel's own), through the same kernel functions: the loader's
 * correctness anchor. Its goodput must match the built-in "reno" (tests/testbed/test_cc_*.py).
 */
#include "tdcc.h"
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

SEC("struct_ops/newreno_cong_avoid")
void BPF_PROG(newreno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/newreno_ssthresh")
__u32 BPF_PROG(newreno_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/newreno_undo_cwnd")
__u32 BPF_PROG(newreno_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops newreno = {
	.cong_avoid = (void *)newreno_cong_avoid,
	.ssthresh = (void *)newreno_ssthresh,
	.undo_cwnd = (void *)newreno_undo_cwnd,
	.name = TDCC_NAME,
};
