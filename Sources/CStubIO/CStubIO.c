#define _GNU_SOURCE
#include "CStubIO.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct cstub_batch {
    unsigned count;
    size_t slot;
    unsigned queued;
    /// The datagrams the last receive filled: only their headers hold what the kernel wrote.
    unsigned filled;
    uint8_t *in_data;
    uint8_t *out_data;
    struct sockaddr_storage *names;
    struct iovec *in_vectors;
    struct iovec *out_vectors;
    struct mmsghdr *in_headers;
    struct mmsghdr *out_headers;
};

cstub_batch *cstub_batch_new(unsigned count, size_t slot) {
    cstub_batch *batch = calloc(1, sizeof *batch);
    if (!batch) return NULL;
    batch->count = count;
    batch->slot = slot;
    batch->in_data = malloc(count * slot);
    batch->out_data = malloc(count * slot);
    batch->names = calloc(count, sizeof *batch->names);
    batch->in_vectors = calloc(count, sizeof *batch->in_vectors);
    batch->out_vectors = calloc(count, sizeof *batch->out_vectors);
    batch->in_headers = calloc(count, sizeof *batch->in_headers);
    batch->out_headers = calloc(count, sizeof *batch->out_headers);
    if (!batch->in_data || !batch->out_data || !batch->names || !batch->in_vectors || !batch->out_vectors
        || !batch->in_headers || !batch->out_headers) {
        cstub_batch_free(batch);
        return NULL;
    }
    for (unsigned i = 0; i < count; i++) {
        batch->in_vectors[i].iov_base = batch->in_data + i * slot;
        batch->in_vectors[i].iov_len = slot;
        struct msghdr *header = &batch->in_headers[i].msg_hdr;
        header->msg_name = &batch->names[i];
        header->msg_namelen = sizeof batch->names[i];
        header->msg_iov = &batch->in_vectors[i];
        header->msg_iovlen = 1;
    }
    return batch;
}

void cstub_batch_free(cstub_batch *batch) {
    if (!batch) return;
    free(batch->in_data);
    free(batch->out_data);
    free(batch->names);
    free(batch->in_vectors);
    free(batch->out_vectors);
    free(batch->in_headers);
    free(batch->out_headers);
    free(batch);
}

int cstub_batch_receive_now(cstub_batch *batch, int fd) {
    batch->queued = 0;
    // The kernel wrote the address length, flags and length of the datagrams it filled last time, and nothing
    // else: set those back. Resetting every header instead wrote a cache line per slot on every receive, most of
    // them for slots a quiet socket never fills (BENCHMARKS.md, round 12).
    for (unsigned i = 0; i < batch->filled; i++) {
        struct msghdr *header = &batch->in_headers[i].msg_hdr;
        header->msg_namelen = sizeof batch->names[i];
        header->msg_flags = 0;
        batch->in_headers[i].msg_len = 0;
    }
    int received = recvmmsg(fd, batch->in_headers, batch->count, MSG_DONTWAIT, NULL);
    batch->filled = received > 0 ? (unsigned)received : 0;
    return received < 0 ? -errno : received;
}

const uint8_t *cstub_batch_datagram(const cstub_batch *batch, unsigned index, size_t *length) {
    *length = batch->in_headers[index].msg_len;
    return batch->in_data + index * batch->slot;
}

const void *cstub_batch_sender(const cstub_batch *batch, unsigned index, uint32_t *length) {
    *length = batch->in_headers[index].msg_hdr.msg_namelen;
    return &batch->names[index];
}

int cstub_batch_queue_reply(cstub_batch *batch, unsigned index, const uint8_t *bytes, size_t length) {
    if (length > batch->slot || batch->queued >= batch->count) return -1;
    unsigned at = batch->queued++;
    uint8_t *slot = batch->out_data + at * batch->slot;
    memcpy(slot, bytes, length);
    batch->out_vectors[at].iov_base = slot;
    batch->out_vectors[at].iov_len = length;
    struct msghdr *header = &batch->out_headers[at].msg_hdr;
    memset(header, 0, sizeof *header);
    header->msg_name = &batch->names[index];
    header->msg_namelen = batch->in_headers[index].msg_hdr.msg_namelen;
    header->msg_iov = &batch->out_vectors[at];
    header->msg_iovlen = 1;
    return 0;
}

/// Sends `count` prepared messages with as few `sendmmsg` calls as it takes, without blocking; returns how many went.
static unsigned send_all(int fd, struct mmsghdr *headers, unsigned count) {
    unsigned sent = 0, went = 0;
    while (sent < count) {
        int result = sendmmsg(fd, headers + sent, count - sent, MSG_DONTWAIT);
        if (result > 0) {
            sent += (unsigned)result;
            went += (unsigned)result;
        } else if (result < 0 && errno == EINTR) {
            continue;
        } else {
            sent += 1;  // this reply cannot go (full buffer, unreachable client): drop it, send the rest
        }
    }
    return went;
}

int cstub_batch_send(cstub_batch *batch, int fd) {
    unsigned went = send_all(fd, batch->out_headers, batch->queued);
    batch->queued = 0;
    return (int)went;
}

int cstub_send_to(int fd, const uint8_t *bytes, size_t length, const void *address, uint32_t address_length) {
    ssize_t result = sendto(fd, bytes, length, MSG_DONTWAIT, (const struct sockaddr *)address, address_length);
    return result < 0 ? -errno : 0;
}

int cstub_send_many(int fd, const uint8_t *data, const size_t *offsets, const size_t *lengths,
                    const struct sockaddr_storage *addresses, const uint32_t *address_lengths, unsigned count) {
    struct mmsghdr headers[64];
    struct iovec vectors[64];
    unsigned done = 0, went = 0;
    while (done < count) {
        unsigned n = count - done < 64 ? count - done : 64;
        memset(headers, 0, sizeof headers[0] * n);
        for (unsigned i = 0; i < n; i++) {
            vectors[i].iov_base = (void *)(data + offsets[done + i]);
            vectors[i].iov_len = lengths[done + i];
            headers[i].msg_hdr.msg_name = (void *)&addresses[done + i];
            headers[i].msg_hdr.msg_namelen = address_lengths[done + i];
            headers[i].msg_hdr.msg_iov = &vectors[i];
            headers[i].msg_hdr.msg_iovlen = 1;
        }
        went += send_all(fd, headers, n);
        done += n;
    }
    return (int)went;
}
