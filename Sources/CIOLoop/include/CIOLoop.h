// epoll and eventfd for discoverd's own event loops (Resolver's IOLoop): Swift's Glibc module does not export them.
#ifndef CIOLOOP_H
#define CIOLOOP_H

#include <stdint.h>

/// Interest and readiness bits. CIOLOOP_EXCLUSIVE (interest only, when a descriptor is first watched): of the
/// loops that watch the same descriptor so, one that is waiting is woken (EPOLLEXCLUSIVE), the first one watching
/// it while it waits. Where the kernel has no EPOLLEXCLUSIVE the descriptor is watched without it.
enum { CIOLOOP_READ = 1, CIOLOOP_WRITE = 2, CIOLOOP_HANGUP = 4, CIOLOOP_EXCLUSIVE = 8 };

/// A new epoll instance with an eventfd already watched (its fd in *wake); -errno on failure.
int cioloop_new(int *wake);

/// Watches (add != 0) or changes the interest in `fd` (CIOLOOP_READ/WRITE bits; CIOLOOP_EXCLUSIVE counts only when
/// adding); 0 or -errno.
int cioloop_watch(int epoll, int fd, int interest, int add);
int cioloop_unwatch(int epoll, int fd);

/// Waits up to `timeout_ms` (-1: forever) for readiness: fills fds[i] and events[i] (CIOLOOP_* bits), returns how
/// many, 0 on a timeout or EINTR, or -errno. The wake eventfd is reported like any other descriptor.
int cioloop_wait(int epoll, int *fds, int *events, int capacity, int timeout_ms);

/// Wakes a waiting loop (writes 1 to the eventfd), and takes the wake-ups (reads it).
void cioloop_wake(int wake);
void cioloop_drain(int wake);

/// Names the calling thread (the first 15 bytes of `name`), as `ps -L` and `top -H` show it.
void cioloop_set_thread_name(const char *name);

#endif
