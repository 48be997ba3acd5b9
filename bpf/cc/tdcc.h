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
 *   ICSK_CA_PRIV_SIZE = 104 bytes);
 * - what a variant wants seen over time (Vegas' diff, Westwood's bandwidth estimate, CTCP's
 *   dwnd, CCP's backlog) it copies into its socket's entry of the socket-storage map
 *   `tdcc_state` (tdcc_publish): user space reads it by the socket's fd
 *   (bpf_map_lookup_elem(map_fd, &sock_fd, &value)); each variant documents its four values.
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

/* A variant's own state as user space sees it: four numbers whose meaning (and unit) the
 * variant documents in docs/congestion-control.md. */
struct tdcc_state {
	__u64 value[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tdcc_state);
} tdcc_state SEC(".maps");

/* Publish this connection's state (creates its entry on first use). */
static __always_inline void tdcc_publish(struct sock *sk, __u64 v0, __u64 v1, __u64 v2, __u64 v3)
{
	struct tdcc_state *st = bpf_sk_storage_get(&tdcc_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (!st)
		return;
	st->value[0] = v0;
	st->value[1] = v1;
	st->value[2] = v2;
	st->value[3] = v3;
}

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
