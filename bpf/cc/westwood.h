/* What Westwood (bpf/cc/westwood.bpf.c) and Westwood+ (bpf/cc/westwoodplus.bpf.c) share: the
 * bytes an ACK reports delivered, with duplicate and cumulative ACKs accounted as Linux's
 * tcp_westwood.c westwood_acked_count() does (after Mascolo et al., MobiCom 2001, Sec. 2.3):
 * a duplicate ACK counts one segment (mss) and is remembered in *accounted; a later cumulative
 * ACK counts only what was not already counted that way.
 */
#ifndef TDCC_WESTWOOD_H
#define TDCC_WESTWOOD_H

#include "tdcc.h"

static __always_inline __u32 westwood_acked_count(const struct tcp_sock *tp, __u32 *snd_una, __u32 *accounted)
{
	__u32 mss = tp->mss_cache;
	__u32 cumul_ack = tp->snd_una - *snd_una;

	if (!cumul_ack) {
		/* duplicate ACK: snd_una did not move, one segment left the network */
		*accounted += mss;
		cumul_ack = mss;
	}
	if (cumul_ack > mss) {
		/* partial or delayed ACK */
		if (*accounted >= cumul_ack) {
			*accounted -= cumul_ack;
			cumul_ack = mss;
		} else {
			cumul_ack -= *accounted;
			*accounted = 0;
		}
	}
	*snd_una = tp->snd_una;
	return cumul_ack;
}

/* ssthresh = BWE·RTTmin/MSS segments, at least 2 (Linux tcp_westwood_bw_rttmin()); bw in
 * bytes per second, rtt_min in microseconds. */
static __always_inline __u32 westwood_bw_rttmin(const struct tcp_sock *tp, __u64 bw_bytes_per_s, __u32 rtt_min_us)
{
	__u64 segs = bw_bytes_per_s * rtt_min_us / USEC_PER_SEC / max(tp->mss_cache, 1U);

	if (segs > TCP_INFINITE_SSTHRESH)
		segs = TCP_INFINITE_SSTHRESH;
	return max((__u32)segs, 2U);
}

#endif
