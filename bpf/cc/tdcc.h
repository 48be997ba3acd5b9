/* Shared by every tcpdelay congestion control written as a BPF struct_ops program.
 *
 * Conventions (docs/congestion-control.md, "How to add one"):
 * - one file per variant, bpf/cc/<variant>.bpf.c, GPL (kernel functions need it);
 * - the ops struct's .name is TDCC_NAME: a 15-character placeholder the loader
 *   (bpf/loader/tcpdelay-cc-load.c) replaces with the instance's kernel name before loading,
 *   so one object can be loaded several times with different parameters;
 * - parameters are `const volatile` globals named param_<name> (the loader sets them before
 *   loading); integers only: BPF has no floating point, fractions are fixed point (say which);
 * - per-connection state lives in the socket's private area (inet_csk_ca(sk), at most
 *   ICSK_CA_PRIV_SIZE = 104 bytes).
 */
#ifndef TDCC_H
#define TDCC_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define TDCC_NAME "tdcc_name_xxxxx"

#ifndef min
#define min(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) ((a) > (b) ? (a) : (b))
#endif

#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define USEC_PER_SEC 1000000ULL

/* Kernel functions callable from a tcp_congestion_ops program (kernel/bpf/bpf_struct_ops +
 * net/ipv4/bpf_tcp_ca.c's kfunc set). */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline bool tcp_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

static __always_inline bool tcp_is_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	/* If in slow start, ensure cwnd grows to twice what was ACKed. */
	if (tcp_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return !!BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

#endif
