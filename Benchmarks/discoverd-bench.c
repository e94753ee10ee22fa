/*
 * discoverd-bench: load generator and latency probe for discoverd's varlink
 * socket, with a plain DNS/UDP client so that Unbound and discoverd's DNS stub
 * are measured by the same code, the same clock and the same process model.
 *
 * Build: cc -O2 -Wall -o discoverd-bench Benchmarks/discoverd-bench.c -lm
 *        (Scripts/bench does this; no dependencies beyond libc.)
 *
 * Modes (JSON result on stdout, one human line on stderr):
 *
 *   qps      --socket PATH --conns N --depth P (--duration S | --total K)
 *            [--names FILE | --name NAME]... [--method M]
 *       N connections, each keeping P calls in flight (varlink pipelining),
 *       for S seconds (or until K calls were sent: a fixed amount of work,
 *       e.g. under callgrind), calling ResolveHTTPS {name} round-robin over
 *       the names. Counts replies/s in the window; every reply must be a
 *       non-error (errors are counted, printed, and make the exit status 1).
 *       One thread, epoll: like dnsperf -T 1.
 *
 *   latency  (--socket PATH [--method M] [--params JSON] | --dns ADDR[:PORT] --name N [--qtype T])
 *            [--count K] [--warmup W] [--flush-before] [--gap-ms G]
 *       One call at a time on one kept-alive connection (or UDP socket);
 *       percentiles of the round trip in microseconds. --flush-before sends
 *       io.discoverd.Resolver.Flush {} (untimed) before each timed call:
 *       every call is then cold.
 *
 *   mix      --name N [--dns [LABEL=]ADDR[:PORT]]... [--socket PATH [--socket-name N2] [--socket-label L]]
 *            [--qtype T] [--count K] [--warmup W] [--gap-ms G]
 *       A cached call one at a time to several servers, interleaved: per
 *       cycle one call to each target, the order rotating per cycle, so every
 *       target is timed in the same state of the machine (a virtual CPU's
 *       wake-up latency drifts between fast and slow within seconds, which
 *       separate runs turn into ratios of 0.6-1.2). K timed calls per target.
 *
 *   stale    --name N [--dns [LABEL=]ADDR[:PORT]]... [--socket PATH [--socket-name N2]
 *            [--socket-label L]] [--qtype T] [--samples K] [--ttl S] [--delay-ms D] [--margin-ms M]
 *       Side by side expired-answer latency of several servers with one client
 *       loop: DNS servers over UDP (each --dns, asked N) and the varlink socket
 *       (ResolveHTTPS N2, default N; give the API its own name when it shares
 *       its cache with a DNS server under test). Per round: poll all until each
 *       holds a fresh copy (varlink: source cache/network; DNS: TTL <= --ttl),
 *       sleep until it has surely expired everywhere (largest remaining TTL +
 *       1 s + M ms; Unbound counts whole seconds and serves TTL 0 as fresh),
 *       then time the first query after expiry to each, the order rotating per
 *       round, and check it was answered stale: varlink says source
 *       "expiredCache"; a DNS server's stale answers carry the stale TTL (30),
 *       never the zone's. Then wait D ms (the upstream delay of the refreshes)
 *       and start the next round.
 *
 *   gai      --name N... [--label L] [--count C] [--getent] [--warm-name W --warmup K] [--dns ADDR --ttl S] [--gap-ms G]
 *       The system resolver as programs use it: each name looked up C times
 *       (default once) with getaddrinfo and getent ahosts' hints (AF_UNSPEC,
 *       AI_ADDRCONFIG | AI_CANONNAME), or with --getent by running
 *       `getent ahosts N` (wall time from spawn to exit). Run it in a mount
 *       namespace whose /etc/resolv.conf names the server. K untimed lookups of
 *       W first (resolver initialisation). With --dns, an A query to ADDR right
 *       after each lookup checks the entry was still stale (TTL > S), i.e. the
 *       lookup found it expired and its refresh was still under way.
 *
 * Clock: CLOCK_MONOTONIC around write()/read() of one request/reply.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_MS 5000

extern char **environ;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("discoverd-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void sleep_us(double us) {
    if (us <= 0) return;
    struct timespec ts = {(time_t)(us / 1e6), (long)(fmod(us, 1e6) * 1e3)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

/* ------------------------------------------------------------ options */

static const char *opt_socket, *opt_dns, *opt_method = "io.discoverd.Resolver.ResolveHTTPS", *opt_params;
static const char *opt_qtype = "HTTPS", *opt_socket_label = "varlink", *opt_socket_name, *opt_warm_name, *opt_label = "";
static char **names;
static int nnames, names_cap;
static int opt_conns = 1, opt_depth = 1, opt_count = 1000, opt_warmup = 100, opt_samples = 30;
static double opt_duration = 10, opt_ttl = 2, opt_delay_ms = 500, opt_margin_ms = 300, opt_gap_ms = 0;
static int opt_flush_before, opt_getent, opt_count_given;
static long opt_total; /* qps: stop after this many calls (0: run for --duration) */

static void add_name(const char *n) {
    if (nnames == names_cap) {
        names_cap = names_cap ? names_cap * 2 : 16;
        names = realloc(names, sizeof(char *) * names_cap);
        if (!names) die("out of memory");
    }
    names[nnames++] = strdup(n);
}

static void load_names(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        size_t n = strcspn(s, " \t\r\n");
        s[n] = 0;
        if (n && s[0] != '#' && s[0] != ';') add_name(s); /* dnsperf format: "name TYPE" -> first word */
    }
    fclose(f);
}

/* ------------------------------------------------------------ varlink */

static int varlink_connect(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) die("socket path too long");
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("connect %s: %s", path, strerror(errno));
    return fd;
}

/* A call message including its NUL; caller frees. */
static char *varlink_call(const char *method, const char *params, size_t *len) {
    char *m = NULL;
    int n = asprintf(&m, "{\"method\":\"%s\",\"parameters\":%s}", method, params ? params : "{}");
    if (n < 0) die("out of memory");
    *len = (size_t)n + 1; /* the terminating NUL of asprintf is the varlink terminator */
    return m;
}

static char *resolve_call(const char *name, size_t *len) {
    char params[600];
    snprintf(params, sizeof params, "{\"name\":\"%s\"}", name);
    return varlink_call(opt_method, params, len);
}

/* No success reply of the Resolver interface has a key named "error"; error replies always do. */
static int is_error_reply(const char *msg) { return strstr(msg, "\"error\"") != NULL; }

static void write_all(int fd, const char *p, size_t len) {
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                struct pollfd pf = {fd, POLLOUT, 0};
                poll(&pf, 1, IO_TIMEOUT_MS);
                continue;
            }
            die("write: %s", strerror(errno));
        }
        p += n, len -= (size_t)n;
    }
}

/* Blocking reader of one NUL-terminated reply on a kept-alive connection. */
struct reader {
    int fd;
    char *buf;
    size_t len, cap, consumed;
};

static char *read_reply(struct reader *r) {
    if (r->consumed) {
        memmove(r->buf, r->buf + r->consumed, r->len - r->consumed);
        r->len -= r->consumed;
        r->consumed = 0;
    }
    for (;;) {
        char *z = memchr(r->buf, 0, r->len);
        if (z) {
            r->consumed = (size_t)(z - r->buf) + 1;
            return r->buf;
        }
        if (r->cap - r->len < 4096) {
            r->cap = r->cap ? r->cap * 2 : 65536;
            r->buf = realloc(r->buf, r->cap);
            if (!r->buf) die("out of memory");
        }
        struct pollfd pf = {r->fd, POLLIN, 0};
        if (poll(&pf, 1, IO_TIMEOUT_MS) <= 0) die("no reply within %d ms", IO_TIMEOUT_MS);
        ssize_t n = read(r->fd, r->buf + r->len, r->cap - r->len);
        if (n == 0) die("daemon closed the connection");
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            die("read: %s", strerror(errno));
        }
        r->len += (size_t)n;
    }
}

/* ------------------------------------------------------------ DNS over UDP */

static int qtype_code(const char *t) {
    if (!strcasecmp(t, "HTTPS")) return 65;
    if (!strcasecmp(t, "SVCB")) return 64;
    if (!strcasecmp(t, "A")) return 1;
    if (!strcasecmp(t, "AAAA")) return 28;
    if (!strcasecmp(t, "TXT")) return 16;
    if (!strcasecmp(t, "MX")) return 15;
    if (!strcasecmp(t, "SRV")) return 33;
    if (!strcasecmp(t, "PTR")) return 12;
    if (!strcasecmp(t, "NS")) return 2;
    if (!strcasecmp(t, "SOA")) return 6;
    if (!strcasecmp(t, "CNAME")) return 5;
    return atoi(t);
}

static int dns_connect(const char *addr) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
    char host[64];
    const char *eq = strchr(addr, '='); /* LABEL=ADDR[:PORT] */
    if (eq) addr = eq + 1;
    snprintf(host, sizeof host, "%s", addr);
    char *colon = strchr(host, ':');
    if (colon) *colon = 0, sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) die("bad IPv4 address %s", addr);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("udp connect: %s", strerror(errno));
    return fd;
}

static size_t dns_query(uint8_t *q, uint16_t id, const char *name, int qtype) {
    size_t n = 0;
    q[n++] = id >> 8, q[n++] = id & 0xff;
    q[n++] = 0x01, q[n++] = 0x00; /* RD */
    q[n++] = 0, q[n++] = 1, q[n++] = 0, q[n++] = 0, q[n++] = 0, q[n++] = 0, q[n++] = 0, q[n++] = 0;
    const char *p = name;
    while (*p) {
        size_t l = strcspn(p, ".");
        if (l == 0 || l > 63) die("bad name %s", name);
        q[n++] = (uint8_t)l;
        memcpy(q + n, p, l), n += l, p += l;
        if (*p == '.') p++;
    }
    q[n++] = 0;
    q[n++] = (uint8_t)(qtype >> 8), q[n++] = qtype & 0xff, q[n++] = 0, q[n++] = 1;
    return n;
}

static size_t skip_name(const uint8_t *m, size_t len, size_t o) {
    while (o < len) {
        uint8_t l = m[o];
        if (l == 0) return o + 1;
        if ((l & 0xc0) == 0xc0) return o + 2;
        o += 1 + l;
    }
    return len + 1;
}

/* One timed exchange: returns rcode (-1: malformed reply, -2: no reply within timeout_ms),
 * *ttl = TTL of the first answer of qtype (-1 if none). */
static int dns_exchange_t(int fd, const char *name, int qtype, long *ttl, double *us, int timeout_ms) {
    uint8_t q[512], r[4096];
    uint16_t id = (uint16_t)random();
    size_t qn = dns_query(q, id, name, qtype);
    double t0 = now_us();
    if (send(fd, q, qn, 0) < 0) die("send: %s", strerror(errno));
    ssize_t n;
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        int left = timeout_ms - (int)((now_us() - t0) / 1e3);
        if (left <= 0 || poll(&pf, 1, left) <= 0) {
            *ttl = -1, *us = now_us() - t0;
            return -2;
        }
        n = recv(fd, r, sizeof r, 0);
        if (n < 0) die("recv: %s", strerror(errno));
        if (n >= 12 && ((r[0] << 8) | r[1]) == id) break; /* else: a late reply to an earlier query */
    }
    *us = now_us() - t0;
    *ttl = -1;
    size_t len = (size_t)n, o = 12;
    int an = (r[6] << 8) | r[7];
    o = skip_name(r, len, o) + 4;
    for (int i = 0; i < an && o + 10 <= len; i++) {
        o = skip_name(r, len, o);
        if (o + 10 > len) return -1;
        int type = (r[o] << 8) | r[o + 1];
        long t = ((long)r[o + 4] << 24) | (r[o + 5] << 16) | (r[o + 6] << 8) | r[o + 7];
        int rdlen = (r[o + 8] << 8) | r[o + 9];
        if (type == qtype && *ttl < 0) *ttl = t;
        o += 10 + (size_t)rdlen;
    }
    return r[3] & 0x0f;
}

static int dns_exchange(int fd, const char *name, int qtype, long *ttl, double *us) {
    int rc = dns_exchange_t(fd, name, qtype, ttl, us, IO_TIMEOUT_MS);
    if (rc == -2) die("no DNS reply within %d ms", IO_TIMEOUT_MS);
    return rc;
}

/* ------------------------------------------------------------ statistics */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *s, int n, double p) {
    if (n == 0) return NAN;
    int k = (int)ceil(p / 100.0 * n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return s[k - 1];
}

struct summary {
    int n;
    double min, p50, p90, p99, max, mean;
};

static struct summary summarize(double *v, int n) {
    struct summary s = {.n = n};
    if (!n) return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    s.min = v[0], s.max = v[n - 1], s.mean = sum / n;
    s.p50 = pct(v, n, 50), s.p90 = pct(v, n, 90), s.p99 = pct(v, n, 99);
    return s;
}

static void json_summary(FILE *f, const char *key, struct summary s) {
    fprintf(f, "\"%s\":{\"n\":%d,\"min_us\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f}",
            key, s.n, s.min, s.p50, s.p90, s.p99, s.max, s.mean);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f), fputc(*s, f);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* ------------------------------------------------------------ qps */

struct conn {
    int fd;
    char *rbuf;
    size_t rlen, rcap;
    char *wbuf; /* pending bytes not yet accepted by the kernel */
    size_t wlen, wcap;
    int inflight;
    unsigned next;
};

static char **calls;
static size_t *call_len;
static long issued; /* calls queued so far (for --total) */

static void conn_queue(struct conn *c, int k) {
    if (opt_total && issued + k > opt_total) k = (int)(opt_total - issued);
    for (int i = 0; i < k; i++, issued++) {
        unsigned j = c->next++ % (unsigned)nnames;
        if (c->wlen + call_len[j] > c->wcap) {
            c->wcap = (c->wlen + call_len[j]) * 2;
            c->wbuf = realloc(c->wbuf, c->wcap);
            if (!c->wbuf) die("out of memory");
        }
        memcpy(c->wbuf + c->wlen, calls[j], call_len[j]);
        c->wlen += call_len[j];
        c->inflight++;
    }
}

static void conn_flush(struct conn *c, int ep) {
    while (c->wlen) {
        ssize_t n = write(c->fd, c->wbuf, c->wlen);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) break;
            die("write: %s", strerror(errno));
        }
        memmove(c->wbuf, c->wbuf + n, c->wlen - (size_t)n);
        c->wlen -= (size_t)n;
    }
    struct epoll_event ev = {.events = EPOLLIN | (c->wlen ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static int mode_qps(void) {
    if (!opt_socket) die("qps needs --socket");
    if (!nnames) die("qps needs --name or --names");
    calls = calloc((size_t)nnames, sizeof *calls);
    call_len = calloc((size_t)nnames, sizeof *call_len);
    for (int i = 0; i < nnames; i++) calls[i] = resolve_call(names[i], &call_len[i]);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct conn *cs = calloc((size_t)opt_conns, sizeof *cs);
    for (int i = 0; i < opt_conns; i++) {
        struct conn *c = &cs[i];
        c->fd = varlink_connect(opt_socket);
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        c->rcap = 1 << 18;
        c->rbuf = malloc(c->rcap);
        c->next = (unsigned)i * 7u;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }
    long ok = 0, errors = 0, ok_window = 0, late = 0;
    long cache_sources = 0;
    char first_error[300] = "";
    double t0 = now_us(), end = opt_total ? INFINITY : t0 + opt_duration * 1e6, stop_at = 0;
    for (int i = 0; i < opt_conns; i++) conn_queue(&cs[i], opt_depth), conn_flush(&cs[i], ep);
    struct epoll_event evs[256];
    long total_inflight = opt_total && opt_total < (long)opt_conns * opt_depth ? opt_total : (long)opt_conns * opt_depth;
    int sending = 1;
    while (total_inflight > 0) {
        double now = now_us();
        if (sending && (opt_total ? issued >= opt_total : now >= end)) sending = 0, stop_at = now;
        if (!sending && now - stop_at > IO_TIMEOUT_MS * 1e3) die("%ld calls unanswered %d ms after the end", total_inflight, IO_TIMEOUT_MS);
        int timeout = sending && !opt_total ? (int)((end - now) / 1e3) + 1 : 100;
        int n = epoll_wait(ep, evs, 256, timeout);
        if (n < 0 && errno != EINTR) die("epoll: %s", strerror(errno));
        now = now_us();
        for (int e = 0; e < n; e++) {
            struct conn *c = evs[e].data.ptr;
            if (evs[e].events & EPOLLOUT) conn_flush(c, ep);
            if (!(evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
            int replies = 0;
            for (;;) {
                if (c->rcap - c->rlen < 65536) {
                    c->rcap *= 2;
                    c->rbuf = realloc(c->rbuf, c->rcap);
                }
                ssize_t r = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
                if (r == 0) die("daemon closed a connection");
                if (r < 0) {
                    if (errno == EINTR) continue;
                    if (errno == EAGAIN) break;
                    die("read: %s", strerror(errno));
                }
                c->rlen += (size_t)r;
                if ((size_t)r < 65536) break; /* drained (avoid one extra EAGAIN read per wakeup) */
            }
            size_t off = 0;
            for (;;) {
                char *z = memchr(c->rbuf + off, 0, c->rlen - off);
                if (!z) break;
                char *msg = c->rbuf + off;
                if (is_error_reply(msg)) {
                    if (!errors++) snprintf(first_error, sizeof first_error, "%.*s", (int)(z - msg), msg);
                } else {
                    ok++;
                    if (now <= end) ok_window++; else late++;
                    if (strstr(msg, "\"source\":\"cache\"")) cache_sources++;
                }
                replies++;
                off = (size_t)(z - c->rbuf) + 1;
            }
            if (off) memmove(c->rbuf, c->rbuf + off, c->rlen - off), c->rlen -= off;
            c->inflight -= replies;
            total_inflight -= replies;
            if (sending && replies) {
                long before = issued;
                conn_queue(c, replies);
                total_inflight += issued - before;
                conn_flush(c, ep);
            }
        }
    }
    double window = ((stop_at ? stop_at : now_us()) - t0) / 1e6;
    double qps = ok_window / window;
    printf("{\"mode\":\"qps\",\"conns\":%d,\"depth\":%d,\"duration_s\":%.3f,\"names\":%d,\"method\":", opt_conns,
           opt_depth, window, nnames);
    json_str(stdout, opt_method);
    printf(",\"replies\":%ld,\"replies_in_window\":%ld,\"errors\":%ld,\"source_cache\":%ld,\"qps\":%.1f", ok + errors,
           ok_window, errors, cache_sources, qps);
    if (errors) printf(",\"first_error\":"), json_str(stdout, first_error);
    printf("}\n");
    fprintf(stderr, "qps: %d conns x depth %d, %.1f s: %.0f replies/s (%ld ok, %ld errors, %ld from cache)\n",
            opt_conns, opt_depth, window, qps, ok, errors, cache_sources);
    if (errors) fprintf(stderr, "first error: %s\n", first_error);
    return errors ? 1 : 0;
}

/* ------------------------------------------------------------ latency */

static int mode_latency(void) {
    if (!!opt_socket == !!opt_dns) die("latency needs exactly one of --socket or --dns");
    double *v = calloc((size_t)opt_count, sizeof *v);
    long errors = 0;
    char first_error[300] = "";
    int total = opt_warmup + opt_count;
    if (opt_socket) {
        struct reader rd = {.fd = varlink_connect(opt_socket)};
        size_t clen, flen;
        char *call;
        if (opt_params) call = varlink_call(opt_method, opt_params, &clen);
        else if (nnames) call = resolve_call(names[0], &clen);
        else call = varlink_call(opt_method, "{}", &clen);
        char *flush = varlink_call("io.discoverd.Resolver.Flush", "{}", &flen);
        for (int i = 0; i < total; i++) {
            if (opt_flush_before) {
                write_all(rd.fd, flush, flen);
                char *m = read_reply(&rd);
                if (is_error_reply(m)) die("Flush failed: %s", m);
            }
            if (opt_gap_ms > 0) sleep_us(opt_gap_ms * 1e3);
            double t0 = now_us();
            write_all(rd.fd, call, clen);
            char *m = read_reply(&rd);
            double dt = now_us() - t0;
            if (is_error_reply(m)) {
                if (!errors++) snprintf(first_error, sizeof first_error, "%s", m);
            }
            if (i >= opt_warmup) v[i - opt_warmup] = dt;
        }
    } else {
        if (!nnames) die("latency --dns needs --name");
        int fd = dns_connect(opt_dns), qt = qtype_code(opt_qtype);
        for (int i = 0; i < total; i++) {
            long ttl;
            double dt;
            if (opt_gap_ms > 0) sleep_us(opt_gap_ms * 1e3);
            int rc = dns_exchange(fd, names[0], qt, &ttl, &dt);
            if (rc != 0) {
                if (!errors++) snprintf(first_error, sizeof first_error, "rcode %d", rc);
            }
            if (i >= opt_warmup) v[i - opt_warmup] = dt;
        }
    }
    struct summary s = summarize(v, opt_count);
    printf("{\"mode\":\"latency\",\"target\":");
    json_str(stdout, opt_socket ? opt_socket : opt_dns);
    printf(",\"call\":");
    json_str(stdout, opt_params ? opt_params : nnames ? names[0] : "{}");
    printf(",\"method\":");
    json_str(stdout, opt_socket ? opt_method : opt_qtype);
    printf(",\"flush_before\":%s,\"warmup\":%d,\"errors\":%ld,", opt_flush_before ? "true" : "false", opt_warmup, errors);
    json_summary(stdout, "latency", s);
    if (errors) printf(",\"first_error\":"), json_str(stdout, first_error);
    printf("}\n");
    fprintf(stderr, "latency %s: n=%d p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us (%ld errors)\n",
            opt_socket ? opt_method : opt_dns, s.n, s.p50, s.p90, s.p99, s.max, errors);
    if (errors) fprintf(stderr, "first error: %s\n", first_error);
    return errors ? 1 : 0;
}

/* ------------------------------------------------------------ stale */

static long reply_ttl(const char *m) {
    const char *t = strstr(m, "\"ttl\":");
    return t ? atol(t + 6) : -1;
}

/* One server timed by the stale mode: a DNS server over UDP, or the varlink socket (ResolveHTTPS). */
struct stale_target {
    int varlink;
    const char *label, *where, *name;
    int fd;
    struct reader rd;
    char *call;
    size_t clen;
    double *v, *rounds; /* samples; per round (-1: not answered stale) */
    int n, bad; /* answers that failed the mode's check (stale: not stale; mix: an error) */
    char first_bad[400];
};

#define MAX_TARGETS 8
static struct stale_target targets[MAX_TARGETS];
static int ntargets;

static void add_dns_target(const char *spec) {
    if (ntargets == MAX_TARGETS) die("at most %d targets", MAX_TARGETS);
    struct stale_target *t = &targets[ntargets++];
    const char *eq = strchr(spec, '=');
    if (eq) t->label = strndup(spec, (size_t)(eq - spec)), t->where = eq + 1;
    else {
        char *l = NULL;
        if (asprintf(&l, "dns%d", ntargets) < 0) die("out of memory");
        t->label = l, t->where = spec;
    }
}

/* Is the target's answer fresh (the refresh has landed)? *ttl gets its remaining TTL. */
static int probe_fresh(struct stale_target *t, int qt, long *ttl) {
    if (t->varlink) {
        write_all(t->rd.fd, t->call, t->clen);
        char *m = read_reply(&t->rd);
        *ttl = reply_ttl(m);
        return !is_error_reply(m) && (strstr(m, "\"source\":\"cache\"") || strstr(m, "\"source\":\"network\""));
    }
    double us;
    int rc = dns_exchange_t(t->fd, t->name, qt, ttl, &us, 3000);
    return rc == 0 && *ttl >= 0 && *ttl <= (long)opt_ttl;
}

/* Polls every target until each answers fresh (varlink: source cache/network; DNS: TTL <= the zone's), i.e. the
 * refresh has landed everywhere; returns the largest remaining TTL in seconds, or -1 on timeout. */
static long settle(int qt) {
    double deadline = now_us() + 20e6;
    while (now_us() < deadline) {
        long worst = 0, ttl;
        int all = 1;
        for (int i = 0; i < ntargets; i++) {
            if (!probe_fresh(&targets[i], qt, &ttl)) all = 0;
            else if (ttl > worst) worst = ttl;
        }
        if (all) return worst;
        sleep_us(200e3);
    }
    return -1;
}

/* Times the first query after expiry to target t and checks it was answered stale. */
static void time_stale(struct stale_target *t, int qt, int round) {
    double us;
    int stale;
    if (t->varlink) {
        double t0 = now_us();
        write_all(t->rd.fd, t->call, t->clen);
        char *m = read_reply(&t->rd);
        us = now_us() - t0;
        stale = !is_error_reply(m) && strstr(m, "\"expiredCache\"");
        if (!stale && !t->bad) snprintf(t->first_bad, sizeof t->first_bad, "%.380s", m);
    } else {
        long ttl;
        int rc = dns_exchange_t(t->fd, t->name, qt, &ttl, &us, 3000);
        /* stale answers carry serve-expired-reply-ttl / stale-ttl (30), never the zone's TTL */
        stale = rc == 0 && ttl > (long)opt_ttl;
        if (!stale && !t->bad) snprintf(t->first_bad, sizeof t->first_bad, "rcode %d ttl %ld", rc, ttl);
    }
    if (stale) t->v[t->n++] = us, t->rounds[round] = us;
    else t->bad++, t->rounds[round] = -1;
}

/* The fields every target's JSON result starts with, up to its count of bad answers (under `bad_key`) and the
 * first of them (under `first_key`), each followed by a comma. */
static void json_target_head(int i, const struct stale_target *t, const char *bad_key, const char *first_key) {
    printf("%s{\"label\":", i ? "," : "");
    json_str(stdout, t->label);
    printf(",\"kind\":\"%s\",\"target\":", t->varlink ? "varlink" : "dns");
    json_str(stdout, t->where);
    printf(",\"name\":");
    json_str(stdout, t->name);
    printf(",\"%s\":%d,", bad_key, t->bad);
    if (t->bad) printf("\"%s\":", first_key), json_str(stdout, t->first_bad), putchar(',');
}

/* The targets of the stale and mix modes: each --dns, then the varlink socket; connected, with room for `samples`
 * timings each (and per-round values when `rounds`). */
static void open_targets(const char *mode, int samples, int rounds) {
    if (!nnames) die("%s needs --name", mode);
    if (opt_socket) {
        if (ntargets == MAX_TARGETS) die("at most %d targets", MAX_TARGETS);
        struct stale_target *t = &targets[ntargets++];
        t->varlink = 1, t->label = opt_socket_label, t->where = opt_socket;
        t->name = opt_socket_name ? opt_socket_name : names[0];
    }
    if (ntargets < 1) die("%s needs --socket and/or --dns", mode);
    for (int i = 0; i < ntargets; i++) {
        struct stale_target *t = &targets[i];
        if (!t->name) t->name = names[0];
        if (t->varlink) t->rd.fd = varlink_connect(t->where), t->call = resolve_call(t->name, &t->clen);
        else t->fd = dns_connect(t->where);
        t->v = calloc((size_t)samples, sizeof *t->v);
        if (rounds) t->rounds = calloc((size_t)samples, sizeof *t->rounds);
        if (!t->v || (rounds && !t->rounds)) die("out of memory");
    }
}

static int mode_stale(void) {
    open_targets("stale", opt_samples, 1);
    int qt = qtype_code(opt_qtype);
    double t_start = now_us();
    /* Prime, wait until every target holds a fresh copy, then until it has surely expired everywhere: a reported
     * remaining TTL r (whole seconds; Unbound serves TTL 0 as fresh) means expired within r + 1 s. */
    long r = settle(qt);
    if (r < 0) die("%s never became fresh in every cache", names[0]);
    for (int i = 0; i < opt_samples; i++) {
        sleep_us((r + 1) * 1e6 + opt_margin_ms * 1e3);
        /* the order rotates per round, so each target is first, second, ... equally often */
        for (int k = 0; k < ntargets; k++) time_stale(&targets[(i + k) % ntargets], qt, i);
        fprintf(stderr, "stale: round %d/%d\n", i + 1, opt_samples);
        if (i + 1 == opt_samples) break;
        sleep_us(opt_delay_ms * 1e3 + 50e3); /* the refreshes are delayed this long upstream */
        r = settle(qt);
        if (r < 0) die("a refresh never landed in every cache");
    }
    printf("{\"mode\":\"stale\",\"qtype\":");
    json_str(stdout, opt_qtype);
    printf(",\"samples\":%d,\"upstream_delay_ms\":%.0f,\"seconds\":%.1f,\"targets\":[", opt_samples, opt_delay_ms,
           (now_us() - t_start) / 1e6);
    for (int i = 0; i < ntargets; i++) {
        struct stale_target *t = &targets[i];
        json_target_head(i, t, "not_stale", "first_not_stale");
        printf("\"rounds_us\":[");
        for (int k = 0; k < opt_samples; k++) printf("%s%.1f", k ? "," : "", t->rounds[k]);
        printf("],");
        json_summary(stdout, "latency", summarize(t->v, t->n)); /* sorts t->v, not t->rounds */
        putchar('}');
    }
    printf("]}\n");
    for (int i = 0; i < ntargets; i++) {
        struct stale_target *t = &targets[i];
        struct summary s = summarize(t->v, t->n);
        fprintf(stderr, "stale %s (%s, %s): p50 %.1f us, p90 %.1f us (n=%d, not stale %d)\n", t->label, t->where,
                t->name, s.p50, s.p90, s.n, t->bad);
        if (t->bad) fprintf(stderr, "  first answer not stale: %s\n", t->first_bad);
    }
    return 0;
}

/* ------------------------------------------------------------ mix */

/* One cached call to target t, timed; returns 0 if answered without error. */
static int time_hit(struct stale_target *t, int qt, double *us) {
    if (t->varlink) {
        double t0 = now_us();
        write_all(t->rd.fd, t->call, t->clen);
        char *m = read_reply(&t->rd);
        *us = now_us() - t0;
        if (is_error_reply(m)) {
            if (!t->bad++) snprintf(t->first_bad, sizeof t->first_bad, "%.380s", m);
            return 1;
        }
        return 0;
    }
    long ttl;
    int rc = dns_exchange(t->fd, t->name, qt, &ttl, us);
    if (rc != 0) {
        if (!t->bad++) snprintf(t->first_bad, sizeof t->first_bad, "rcode %d", rc);
        return 1;
    }
    return 0;
}

static int mode_mix(void) {
    open_targets("mix", opt_count, 0);
    int qt = qtype_code(opt_qtype);
    double us;
    for (int i = 0; i < opt_warmup; i++)
        for (int k = 0; k < ntargets; k++) time_hit(&targets[k], qt, &us);
    for (int k = 0; k < ntargets; k++) targets[k].bad = 0;
    /* one call to each target per cycle, the order rotating per cycle: every target sees the machine in the same
     * state (a virtual CPU's wake-up latency drifts within seconds) and is first equally often */
    for (int i = 0; i < opt_count; i++) {
        if (opt_gap_ms > 0) sleep_us(opt_gap_ms * 1e3);
        for (int k = 0; k < ntargets; k++) {
            struct stale_target *t = &targets[(i + k) % ntargets];
            time_hit(t, qt, &us);
            t->v[t->n++] = us;
        }
    }
    long errors = 0;
    printf("{\"mode\":\"mix\",\"qtype\":");
    json_str(stdout, opt_qtype);
    printf(",\"count\":%d,\"warmup\":%d,\"targets\":[", opt_count, opt_warmup);
    for (int i = 0; i < ntargets; i++) {
        struct stale_target *t = &targets[i];
        errors += t->bad;
        json_target_head(i, t, "errors", "first_error");
        struct summary s = summarize(t->v, t->n);
        json_summary(stdout, "latency", s);
        putchar('}');
        fprintf(stderr, "mix %s (%s): n=%d p50 %.1f us, p90 %.1f us, p99 %.1f us (%d errors)\n", t->label, t->where,
                s.n, s.p50, s.p90, s.p99, t->bad);
    }
    printf("]}\n");
    return errors ? 1 : 0;
}

/* ------------------------------------------------------------ gai */

/* The system resolver as programs see it: getaddrinfo with getent ahosts' hints (AF_UNSPEC, AI_ADDRCONFIG |
 * AI_CANONNAME), in this process, or `getent ahosts NAME` itself as a child process (wall time from spawn to exit).
 * Run it in a mount namespace whose /etc/resolv.conf names the server under test. */
static int lookup(const char *name, int use_getent, double *us) {
    double t0 = now_us();
    int rc;
    if (use_getent) {
        char *argv[] = {"getent", "ahosts", (char *)name, NULL};
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        pid_t pid;
        if (posix_spawnp(&pid, "getent", &fa, NULL, argv, environ) != 0) die("cannot run getent");
        posix_spawn_file_actions_destroy(&fa);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    } else {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_ADDRCONFIG | AI_CANONNAME}, *res = NULL;
        rc = getaddrinfo(name, NULL, &hints, &res);
        if (res) freeaddrinfo(res);
    }
    *us = now_us() - t0;
    return rc;
}

static int mode_gai(void) {
    if (!nnames) die("gai needs --name or --names");
    if (!opt_count_given) opt_count = 1; /* each name once: the first lookup after expiry */
    int n = nnames * opt_count, k = 0, errors = 0, checked_stale = 0, checked_fresh = 0, dfd = -1;
    double *v = calloc((size_t)n, sizeof *v), us;
    char first_error[300] = "";
    if (opt_dns) dfd = dns_connect(opt_dns);
    for (int i = 0; i < opt_warmup; i++) lookup(opt_warm_name ? opt_warm_name : names[0], opt_getent, &us);
    for (int i = 0; i < nnames; i++) {
        for (int c = 0; c < opt_count; c++) {
            if (opt_gap_ms > 0) sleep_us(opt_gap_ms * 1e3);
            int rc = lookup(names[i], opt_getent, &us);
            v[k++] = us;
            if (rc && !errors++) snprintf(first_error, sizeof first_error, "%s: %s %d", names[i], opt_getent ? "getent exit" : "getaddrinfo", rc);
            if (dfd >= 0) {
                /* Right after the timed lookup: does the server still hold the entry as stale (TTL > the zone's),
                 * i.e. had it expired and is its refresh still under way? */
                long ttl;
                double dt;
                int drc = dns_exchange_t(dfd, names[i], 1, &ttl, &dt, 3000);
                if (drc == 0 && ttl > (long)opt_ttl) checked_stale++;
                else checked_fresh++;
            }
        }
    }
    struct summary s = summarize(v, k);
    printf("{\"mode\":\"gai\",\"label\":");
    json_str(stdout, opt_label);
    printf(",\"how\":\"%s\",\"names\":%d,\"count\":%d,\"errors\":%d,", opt_getent ? "getent" : "getaddrinfo",
           nnames, opt_count, errors);
    if (dfd >= 0) printf("\"checked_stale\":%d,\"checked_fresh\":%d,", checked_stale, checked_fresh);
    json_summary(stdout, "latency", s);
    if (errors) printf(",\"first_error\":"), json_str(stdout, first_error);
    printf("}\n");
    fprintf(stderr, "gai %s %s: n=%d p50 %.1f us, p90 %.1f us, max %.1f us (%d errors%s)\n", opt_label, opt_getent ? "getent" : "getaddrinfo",
            s.n, s.p50, s.p90, s.max, errors, dfd >= 0 ? ", stale check below" : "");
    if (dfd >= 0) fprintf(stderr, "  entry stale right after the lookup: %d of %d\n", checked_stale, checked_stale + checked_fresh);
    if (errors) fprintf(stderr, "first error: %s\n", first_error);
    return errors ? 1 : 0;
}

/* ------------------------------------------------------------ main */

static void usage(void) {
    fputs("usage: discoverd-bench qps|latency|mix|stale|gai [options]  (see the comment at the top of the source)\n", stderr);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    signal(SIGPIPE, SIG_IGN);
    srandom((unsigned)getpid() ^ (unsigned)now_us());
    const char *mode = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
#define ARG() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), ""))
        if (!strcmp(a, "--socket")) opt_socket = ARG();
        else if (!strcmp(a, "--dns")) add_dns_target(opt_dns = ARG());
        else if (!strcmp(a, "--socket-label")) opt_socket_label = ARG();
        else if (!strcmp(a, "--socket-name")) opt_socket_name = ARG();
        else if (!strcmp(a, "--total")) opt_total = atol(ARG());
        else if (!strcmp(a, "--getent")) opt_getent = 1;
        else if (!strcmp(a, "--warm-name")) opt_warm_name = ARG();
        else if (!strcmp(a, "--label")) opt_label = ARG();
        else if (!strcmp(a, "--method")) opt_method = ARG();
        else if (!strcmp(a, "--params")) opt_params = ARG();
        else if (!strcmp(a, "--name")) add_name(ARG());
        else if (!strcmp(a, "--names")) load_names(ARG());
        else if (!strcmp(a, "--qtype")) opt_qtype = ARG();
        else if (!strcmp(a, "--conns")) opt_conns = atoi(ARG());
        else if (!strcmp(a, "--depth")) opt_depth = atoi(ARG());
        else if (!strcmp(a, "--duration")) opt_duration = atof(ARG());
        else if (!strcmp(a, "--count")) opt_count = atoi(ARG()), opt_count_given = 1;
        else if (!strcmp(a, "--warmup")) opt_warmup = atoi(ARG());
        else if (!strcmp(a, "--samples")) opt_samples = atoi(ARG());
        else if (!strcmp(a, "--ttl")) opt_ttl = atof(ARG());
        else if (!strcmp(a, "--delay-ms")) opt_delay_ms = atof(ARG());
        else if (!strcmp(a, "--margin-ms")) opt_margin_ms = atof(ARG());
        else if (!strcmp(a, "--gap-ms")) opt_gap_ms = atof(ARG());
        else if (!strcmp(a, "--flush-before")) opt_flush_before = 1;
        else die("unknown option %s", a);
    }
    if (opt_conns < 1 || opt_depth < 1 || opt_count < 1 || opt_samples < 1 || opt_duration <= 0) die("bad numbers");
    if (opt_duration > 600 || opt_samples > 1000 || (long)opt_count + opt_warmup > 10000000L) die("refusing an unbounded run");
    if (!strcmp(mode, "qps")) return mode_qps();
    if (!strcmp(mode, "latency")) return mode_latency();
    if (!strcmp(mode, "stale")) return mode_stale();
    if (!strcmp(mode, "mix")) return mode_mix();
    if (!strcmp(mode, "gai")) return mode_gai();
    usage();
}
