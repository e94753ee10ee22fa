// See include/CIOLoop.h.
#define _GNU_SOURCE
#include "CIOLoop.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

int cioloop_new(int *wake) {
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (epoll < 0) return -errno;
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) {
        int code = errno;
        close(epoll);
        return -code;
    }
    struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) != 0) {
        int code = errno;
        close(fd);
        close(epoll);
        return -code;
    }
    *wake = fd;
    return epoll;
}

int cioloop_watch(int epoll, int fd, int interest, int add) {
    struct epoll_event event = {.events = 0, .data.fd = fd};
    if (interest & CIOLOOP_READ) event.events |= EPOLLIN | EPOLLRDHUP;
    if (interest & CIOLOOP_WRITE) event.events |= EPOLLOUT;
    if (add && (interest & CIOLOOP_EXCLUSIVE)) {
        // EPOLLEXCLUSIVE goes with EPOLLIN and EPOLLOUT (not EPOLLRDHUP), and only when the descriptor is added.
        struct epoll_event exclusive = {.events = (event.events & ~EPOLLRDHUP) | EPOLLEXCLUSIVE, .data.fd = fd};
        if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &exclusive) == 0) return 0;
        // A kernel or sandbox without EPOLLEXCLUSIVE: watched as before, every watcher woken.
        if (errno != EINVAL) return -errno;
    }
    return epoll_ctl(epoll, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event) == 0 ? 0 : -errno;
}

int cioloop_unwatch(int epoll, int fd) { return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL) == 0 ? 0 : -errno; }

int cioloop_wait(int epoll, int *fds, int *events, int capacity, int timeout_ms) {
    struct epoll_event ready[64];
    if (capacity > 64) capacity = 64;
    int n = epoll_wait(epoll, ready, capacity, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -errno;
    for (int i = 0; i < n; i++) {
        int bits = 0;
        if (ready[i].events & (EPOLLIN | EPOLLPRI)) bits |= CIOLOOP_READ;
        if (ready[i].events & EPOLLOUT) bits |= CIOLOOP_WRITE;
        // An error or a hang-up is reported as readable too, so that a read finds it.
        if (ready[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) bits |= CIOLOOP_HANGUP | CIOLOOP_READ;
        fds[i] = ready[i].data.fd;
        events[i] = bits;
    }
    return n;
}

void cioloop_wake(int wake) {
    uint64_t one = 1;
    ssize_t n = write(wake, &one, sizeof one);
    (void)n;  // EAGAIN: the counter is full, so a wake-up is pending anyway
}

void cioloop_drain(int wake) {
    uint64_t value;
    ssize_t n = read(wake, &value, sizeof value);
    (void)n;
}

void cioloop_set_thread_name(const char *name) {
    char short_name[16];
    strncpy(short_name, name, sizeof short_name - 1);
    short_name[sizeof short_name - 1] = 0;
    pthread_setname_np(pthread_self(), short_name);
}
