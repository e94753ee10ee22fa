/* Heap that OpenSSL holds per verified TLS client connection, set up the way CTLSShim sets one up (memory BIOs,
 * the name checked, TLS 1.2 minimum): N handshakes with the lab's Unbound DoT server, glibc mallinfo2 before and
 * after. BENCHMARKS.md, "Encrypted upstreams", memory row.
 *   cc -O2 -o /tmp/tls-mem Benchmarks/tls-connection-memory.c -lssl -lcrypto
 *   ip netns exec dlab-a /tmp/tls-mem /tmp/discoverd-lab/ca/ca.pem 192.0.2.63 200   (lab up, lab lock held) */
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
int main(int argc, char **argv) {
    const char *ca = argv[1], *ip = argv[2]; int n = atoi(argv[3]);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_load_verify_locations(ctx, ca, NULL);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    // As CTLSShim: no SSL_MODE_RELEASE_BUFFERS (its buffers stay with the connection; round 12).
    SSL **conns = calloc(n, sizeof *conns);
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(853)};
        inet_pton(AF_INET, ip, &a.sin_addr);
        if (connect(fd, (void *)&a, sizeof a) != 0) { perror("connect"); return 1; }
        SSL *ssl = SSL_new(ctx);
        BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
        SSL_set_bio(ssl, in, out);
        SSL_set1_host(ssl, "dns.lab.test");
        SSL_set_tlsext_host_name(ssl, "dns.lab.test");
        SSL_set_connect_state(ssl);
        char buf[16384];
        for (;;) {
            int r = SSL_do_handshake(ssl);
            int pend;
            while ((pend = BIO_read(out, buf, sizeof buf)) > 0) write(fd, buf, pend);
            if (r == 1) break;
            int e = SSL_get_error(ssl, r);
            if (e != SSL_ERROR_WANT_READ) { ERR_print_errors_fp(stderr); return 1; }
            int got = read(fd, buf, sizeof buf);
            if (got <= 0) { fprintf(stderr, "eof\n"); return 1; }
            BIO_write(in, buf, got);
        }
        conns[i] = ssl;
    }
    struct mallinfo2 after = mallinfo2();
    printf("connections %d, heap in use per connection: %.1f KB (uordblks %zu -> %zu)\n", n,
           (double)(after.uordblks - before.uordblks) / n / 1024.0, before.uordblks, after.uordblks);
    return 0;
}
