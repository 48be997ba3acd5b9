/* tdclock: the clock of a reference-kernel guest, read over UDP (tcpdelay/testbed/guest_clock.py).
 *
 * Built statically by tcpdelay (cc -static) into the guest's initramfs as /bin/tdclock and started
 * by its /init: `tdclock PORT`. For every datagram of 8 to 64 bytes it receives, it answers with
 * that datagram followed by three 64-bit little-endian nanosecond readings of the guest's
 * CLOCK_MONOTONIC (the clock tcpdelay's senders and receivers stamp packets with):
 *
 *   t2  when the probe reached the guest's socket layer: the kernel's receive timestamp
 *       (SO_TIMESTAMPNS, on CLOCK_REALTIME) moved onto CLOCK_MONOTONIC by the two clocks'
 *       difference read back to back, so the guest's scheduling delay is not in it;
 *   t3  just before the answer is sent;
 *   rt3 CLOCK_REALTIME at t3 (for the record).
 *
 * With the prober's send and receive times t1 and t4 this is NTP's on-wire exchange (RFC 5905
 * §8): offset = ((t2 - t1) + (t3 - t4)) / 2, within +- ((t4 - t1) - (t3 - t2)) / 2.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static int64_t ns_of(const struct timespec *ts) {
    return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ns_of(&ts);
}

static void put64(unsigned char *p, int64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)((uint64_t)v >> (8 * i));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: tdclock PORT\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int on = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])), .sin_addr = {INADDR_ANY}};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) < 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("tdclock");
        return 1;
    }
    for (;;) {
        unsigned char buf[64 + 24];
        char control[256];
        struct sockaddr_in peer;
        struct iovec iov = {.iov_base = buf, .iov_len = 64};
        struct msghdr msg = {.msg_name = &peer, .msg_namelen = sizeof peer, .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = control, .msg_controllen = sizeof control};
        ssize_t n = recvmsg(fd, &msg, 0);
        if (n < 8 || (msg.msg_flags & MSG_TRUNC))
            continue;
        /* the two clocks' difference now (read real, mono, real: the mean of the two reals) */
        int64_t r0 = now_ns(CLOCK_REALTIME), m = now_ns(CLOCK_MONOTONIC), r1 = now_ns(CLOCK_REALTIME);
        int64_t real_minus_mono = (r0 + (r1 - r0) / 2) - m;
        int64_t t2 = m;  /* no kernel timestamp: when the read returned */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                t2 = ns_of(&ts) - real_minus_mono;
            }
        put64(buf + n, t2);
        int64_t rt3 = now_ns(CLOCK_REALTIME), t3 = now_ns(CLOCK_MONOTONIC);
        put64(buf + n + 8, t3);
        put64(buf + n + 16, rt3);
        sendto(fd, buf, (size_t)n + 24, 0, (struct sockaddr *)&peer, msg.msg_namelen);
    }
}
