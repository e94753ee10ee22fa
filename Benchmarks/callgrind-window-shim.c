// LD_PRELOAD shim for Scripts/bench-dot-cost --only footprint: callgrind instruments (and simulates caches for) a
// forwarder only from an epoll_wait's or poll's return (stubby's getdns polls) to its next sendto or sendmsg, the
// answer to the client; that window is dumped ("reply"). A write (the query to the DoT server, the end of a query
// half) ends a window undumped. Switching instrumentation on clears callgrind's cache simulator, so with caches
// larger than a window touches, a dump's I1 and D1 misses are the distinct 64-byte lines of code and data that
// window ran and touched, as if every cache had been emptied while the forwarder waited: what the reply half of a
// cold miss has to fetch. Under valgrind only; outside it the requests do nothing.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

static __thread int windowOpen;

static void endWindow(int dump) {
    if (!windowOpen) return;
    if (dump) CALLGRIND_DUMP_STATS_AT("reply");
    CALLGRIND_STOP_INSTRUMENTATION;
    windowOpen = 0;
}

// After a wait that returned events: a window starts, with an empty simulated cache.
static int beginWindow(int ready) {
    if (ready > 0) {
        CALLGRIND_START_INSTRUMENTATION;
        CALLGRIND_ZERO_STATS;
        windowOpen = 1;
    }
    return ready;
}

int epoll_wait(int fd, struct epoll_event *events, int count, int timeout) {
    static int (*real)(int, struct epoll_event *, int, int);
    if (!real) real = (int (*)(int, struct epoll_event *, int, int))dlsym(RTLD_NEXT, "epoll_wait");
    endWindow(0);
    int ready = real(fd, events, count, timeout);
    return beginWindow(ready);
}

int poll(struct pollfd *fds, nfds_t count, int timeout) {
    static int (*real)(struct pollfd *, nfds_t, int);
    if (!real) real = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
    endWindow(0);
    int ready = real(fds, count, timeout);
    return beginWindow(ready);
}

ssize_t sendto(int fd, const void *buffer, size_t length, int flags, const struct sockaddr *to, socklen_t size) {
    static ssize_t (*real)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t, int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT,
                                                                                                      "sendto");
    endWindow(1);
    return real(fd, buffer, length, flags, to, size);
}

ssize_t sendmsg(int fd, const struct msghdr *message, int flags) {
    static ssize_t (*real)(int, const struct msghdr *, int);
    if (!real) real = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
    endWindow(1);
    return real(fd, message, flags);
}

ssize_t write(int fd, const void *buffer, size_t length) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    endWindow(0);
    return real(fd, buffer, length);
}
