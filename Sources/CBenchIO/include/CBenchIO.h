// epoll for the discovery benchmark's reader (Swift's Glibc module has no sys/epoll.h).
#ifndef CBENCHIO_H
#define CBENCHIO_H

#include <stdint.h>

/// A new epoll instance (close-on-exec), or -1 with errno set.
int cbench_epoll_create(void);

/// Watches `fd` for input (level-triggered), reported with `tag`. 0, or -1 with errno set.
int cbench_epoll_add(int epfd, int fd, uint64_t tag);

/// Stops watching `fd`. 0, or -1 with errno set.
int cbench_epoll_remove(int epfd, int fd);

/// Waits up to `timeout_ms` for input; writes the tags of up to `max` ready descriptors. Count, or -1 (errno).
int cbench_epoll_wait(int epfd, uint64_t *tags, int max, int timeout_ms);

#endif
