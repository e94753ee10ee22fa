/*
 * LD_PRELOAD shim for running discoverd under valgrind 3.19 (Scripts/bench, callgrind).
 *
 * libdispatch's signal thread calls sigsuspend() with a mask in read-only memory; valgrind 3.19's
 * rt_sigsuspend wrapper edits the mask in place (to keep its own signals deliverable) and dies with
 * "VALGRIND INTERNAL ERROR: Valgrind received a signal 11". This passes a writable copy instead.
 * It changes nothing else and costs nothing measurable (the call happens once, on an idle thread).
 *
 * Build: cc -O2 -shared -fPIC -o valgrind-sigsuspend-shim.so Benchmarks/valgrind-sigsuspend-shim.c
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, (size_t)(_NSIG / 8));
}
