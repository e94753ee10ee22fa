// Batched UDP I/O for the DNS stub's worker threads: recvmmsg/sendmmsg need _GNU_SOURCE, which Swift's Glibc
// module does not define. One batch owns every buffer a worker needs; nothing is allocated per datagram.
#ifndef CSTUBIO_H
#define CSTUBIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct cstub_batch cstub_batch;

/// A batch of `count` datagram slots of `slot` bytes each, for receiving and for replies. NULL when out of memory.
cstub_batch *cstub_batch_new(unsigned count, size_t slot);
void cstub_batch_free(cstub_batch *batch);

/// Takes up to `count` datagrams without waiting (recvmmsg, MSG_DONTWAIT): for a loop that found the socket
/// readable. Returns how many, or -errno. Clears the replies queued before.
int cstub_batch_receive_now(cstub_batch *batch, int fd);

/// Datagram `index` of the last receive: its bytes and length.
const uint8_t *cstub_batch_datagram(const cstub_batch *batch, unsigned index, size_t *length);

/// The sender of datagram `index` (a struct sockaddr) and its length.
const void *cstub_batch_sender(const cstub_batch *batch, unsigned index, uint32_t *length);

/// Queues `length` bytes as the reply to datagram `index`. Returns 0, or -1 when it does not fit a slot.
int cstub_batch_queue_reply(cstub_batch *batch, unsigned index, const uint8_t *bytes, size_t length);

/// Sends every queued reply (sendmmsg, MSG_DONTWAIT; a reply that cannot go is dropped). Returns how many went.
int cstub_batch_send(cstub_batch *batch, int fd);

/// Sends one datagram to `address` without blocking. Returns 0 or -errno.
int cstub_send_to(int fd, const uint8_t *bytes, size_t length, const void *address, uint32_t address_length);

/// Sends `count` datagrams (each `lengths[i]` bytes at `data + offsets[i]`, to `addresses[i]`) with as few
/// `sendmmsg` calls as possible, without blocking; one that cannot go is dropped. Returns how many went.
int cstub_send_many(int fd, const uint8_t *data, const size_t *offsets, const size_t *lengths,
                    const struct sockaddr_storage *addresses, const uint32_t *address_lengths, unsigned count);

#endif
