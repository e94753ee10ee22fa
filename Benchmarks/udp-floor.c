// udp-floor: the fastest DNS "server" a loopback socket allows, to measure the floor under dnsperf.
//
//   udp-floor ADDR PORT [THREADS]
//
// Each thread owns an SO_REUSEPORT socket on ADDR:PORT and answers every datagram that looks like a query with
// the query itself turned into a reply (QR, RA set; ANCOUNT 1) plus one fixed A record pointing at the question
// name (192.0.2.1, TTL 300): no parsing past the header, no cache, no allocation. Datagrams are read and written
// 64 at a time with recvmmsg/sendmmsg, as discoverd's stub does. What dnsperf measures against it is the cost of
// the kernel's loopback path and of dnsperf itself: the ceiling no DNS server on this machine can pass
// (Scripts/bench measurement 1, row "UDP floor"). Runs until killed.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define MAX_DNS 1232

static struct sockaddr_storage bind_address;
static socklen_t bind_length;

static const unsigned char answer_rr[] = {
    0xC0, 0x0C,              // name: pointer to the question name
    0x00, 0x01, 0x00, 0x01,  // type A, class IN
    0x00, 0x00, 0x01, 0x2C,  // TTL 300
    0x00, 0x04, 192, 0, 2, 1,
};

// The end of the question section (header + QNAME + QTYPE + QCLASS), or 0 when the datagram is not one query
// with a plain question.
static size_t question_end(const unsigned char *bytes, size_t length) {
    if (length < 12 || (bytes[2] & 0x80) || bytes[4] != 0 || bytes[5] != 1) return 0;
    size_t offset = 12;
    while (offset < length && bytes[offset] != 0) {
        if (bytes[offset] & 0xC0) return 0;
        offset += 1 + bytes[offset];
    }
    offset += 1 + 4;
    return offset <= length ? offset : 0;
}

static void *serve(void *unused) {
    (void)unused;
    int fd = socket(bind_address.ss_family, SOCK_DGRAM, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&bind_address, bind_length) != 0) {
        perror("udp-floor: socket");
        exit(1);
    }
    static __thread unsigned char in[BATCH][MAX_DNS], out[BATCH][MAX_DNS + sizeof answer_rr];
    static __thread struct sockaddr_storage peers[BATCH];
    struct mmsghdr received[BATCH], replies[BATCH];
    struct iovec in_vec[BATCH], out_vec[BATCH];
    for (;;) {
        for (int i = 0; i < BATCH; i++) {
            in_vec[i] = (struct iovec){.iov_base = in[i], .iov_len = MAX_DNS};
            received[i].msg_hdr = (struct msghdr){
                .msg_name = &peers[i], .msg_namelen = sizeof peers[i], .msg_iov = &in_vec[i], .msg_iovlen = 1};
        }
        int count = recvmmsg(fd, received, BATCH, MSG_WAITFORONE, NULL);
        if (count < 0) {
            if (errno == EINTR) continue;
            perror("udp-floor: recvmmsg");
            exit(1);
        }
        int replies_count = 0;
        for (int i = 0; i < count; i++) {
            size_t length = received[i].msg_len;
            size_t end = question_end(in[i], length);
            if (end == 0) continue;
            unsigned char *reply = out[replies_count];
            memcpy(reply, in[i], end);
            reply[2] = (unsigned char)((reply[2] | 0x80) & ~0x02);  // QR, not TC; RD copied
            reply[3] = 0x80;                                       // RA, NOERROR
            reply[6] = 0, reply[7] = 1;                            // ANCOUNT 1
            reply[8] = reply[9] = reply[10] = reply[11] = 0;       // no NS, no AR (the query's OPT is dropped)
            memcpy(reply + end, answer_rr, sizeof answer_rr);
            out_vec[replies_count] = (struct iovec){.iov_base = reply, .iov_len = end + sizeof answer_rr};
            replies[replies_count].msg_hdr = (struct msghdr){
                .msg_name = &peers[i], .msg_namelen = received[i].msg_hdr.msg_namelen,
                .msg_iov = &out_vec[replies_count], .msg_iovlen = 1};
            replies_count++;
        }
        for (int sent = 0; sent < replies_count;) {
            int n = sendmmsg(fd, replies + sent, replies_count - sent, 0);
            if (n < 0) {
                if (errno == EINTR) continue;
                break;  // a full socket buffer drops the rest, as a server under load would
            }
            sent += n;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: udp-floor ADDR PORT [THREADS]\n");
        return 2;
    }
    int port = atoi(argv[2]), threads = argc > 3 ? atoi(argv[3]) : 1;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&bind_address;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&bind_address;
    if (inet_pton(AF_INET, argv[1], &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET, v4->sin_port = htons((unsigned short)port), bind_length = sizeof *v4;
    } else if (inet_pton(AF_INET6, argv[1], &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6, v6->sin6_port = htons((unsigned short)port), bind_length = sizeof *v6;
    } else {
        fprintf(stderr, "udp-floor: %s is not an IP address\n", argv[1]);
        return 2;
    }
    if (threads < 1) threads = 1;
    pthread_t ids[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&ids[i], NULL, serve, NULL);
    pthread_join(ids[0], NULL);
    return 0;
}
