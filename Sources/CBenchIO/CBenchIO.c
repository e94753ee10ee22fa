#include "CBenchIO.h"

#include <stddef.h>
#include <sys/epoll.h>

int cbench_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int cbench_epoll_add(int epfd, int fd, uint64_t tag) {
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = tag};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

int cbench_epoll_remove(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int cbench_epoll_wait(int epfd, uint64_t *tags, int max, int timeout_ms) {
    struct epoll_event events[1024];
    if (max > 1024) max = 1024;
    int n = epoll_wait(epfd, events, max, timeout_ms);
    for (int i = 0; i < n; i++) tags[i] = events[i].data.u64;
    return n;
}
