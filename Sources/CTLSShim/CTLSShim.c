// See include/CTLSShim.h.
#include "CTLSShim.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(CTLS_KEY_NOT_PINNED == X509_V_ERR_APPLICATION_VERIFICATION, "the pin error is OpenSSL's");

struct ctls_context {
    SSL_CTX *ctx;
    pthread_mutex_t lock;
    /// The latest resumable session a server gave (one reference held), taken by the next connection.
    SSL_SESSION *session;
    /// The pins (32-byte SHA-256 digests) that authenticate a server instead of the trust store; none: PKIX.
    uint8_t *pins;
    size_t pin_count;
};

struct ctls_connection {
    ctls_context *context;
    SSL *ssl;
    BIO *in;   // ciphertext from the server (SSL reads it)
    BIO *out;  // ciphertext to the server (SSL writes it)
    long verify_error;
    char verify_subject[256];
    /// The pin of the key the server presented, noted by a pinned context's check and at a refusal: after a
    /// refusal OpenSSL keeps no peer certificate to read it from.
    uint8_t peer_pin[32];
    int has_peer_pin;
    char error[256];
};

static void copy_text(char *to, size_t size, const char *from) {
    if (to == NULL || size == 0) return;
    snprintf(to, size, "%s", from ? from : "");
}

/// The OpenSSL error queue of this thread as one line (and empties it).
static void take_errors(char *to, size_t size, const char *fallback) {
    unsigned long code;
    size_t used = 0;
    if (size == 0) return;
    to[0] = 0;
    while ((code = ERR_get_error()) != 0) {
        char one[200];
        ERR_error_string_n(code, one, sizeof one);
        if (used == 0) {
            used = (size_t)snprintf(to, size, "%s", one);
        } else if (used < size) {
            used += (size_t)snprintf(to + used, size - used, "; %s", one);
        }
    }
    if (to[0] == 0) copy_text(to, size, fallback);
}

static int new_session(SSL *ssl, SSL_SESSION *session) {
    ctls_context *context = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    if (context == NULL || !SSL_SESSION_is_resumable(session)) return 0;
    pthread_mutex_lock(&context->lock);
    SSL_SESSION *old = context->session;
    context->session = session;
    pthread_mutex_unlock(&context->lock);
    if (old) SSL_SESSION_free(old);
    return 1;  // the reference is ours now
}

ctls_context *ctls_context_new(const char *ca_file, int verify, const uint8_t *alpn, size_t alpn_length,
                               char *error, size_t error_size) {
    ERR_clear_error();
    ctls_context *context = calloc(1, sizeof *context);
    if (context == NULL) {
        copy_text(error, error_size, "out of memory");
        return NULL;
    }
    context->ctx = SSL_CTX_new(TLS_client_method());
    if (context->ctx == NULL) goto failed;
    if (!SSL_CTX_set_min_proto_version(context->ctx, TLS1_2_VERSION)) goto failed;
    if (ca_file && !SSL_CTX_load_verify_locations(context->ctx, ca_file, NULL)) goto failed;
    SSL_CTX_set_verify(context->ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    // SSL_CTX_set_alpn_protos returns 0 on success.
    if (alpn && alpn_length > 0 && SSL_CTX_set_alpn_protos(context->ctx, alpn, (unsigned)alpn_length) != 0) goto failed;
    // No SSL_MODE_RELEASE_BUFFERS: with it, OpenSSL freed its read and write buffers (about 17 KB each) after every
    // record and allocated them again for the next, two large allocations a query and two a reply. A kept
    // connection carries a few queries at a time; its buffers are worth keeping (BENCHMARKS.md, round 12).
    SSL_CTX_set_session_cache_mode(context->ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(context->ctx, new_session);
    SSL_CTX_set_app_data(context->ctx, context);
    pthread_mutex_init(&context->lock, NULL);
    return context;
failed:
    take_errors(error, error_size, "cannot make a TLS context");
    if (context->ctx) SSL_CTX_free(context->ctx);
    free(context);
    return NULL;
}

void ctls_context_free(ctls_context *context) {
    if (context == NULL) return;
    SSL_CTX_set_app_data(context->ctx, NULL);
    SSL_CTX_free(context->ctx);
    if (context->session) SSL_SESSION_free(context->session);
    free(context->pins);
    pthread_mutex_destroy(&context->lock);
    free(context);
}

int ctls_context_has_session(ctls_context *context) {
    pthread_mutex_lock(&context->lock);
    int has = context->session != NULL;
    pthread_mutex_unlock(&context->lock);
    return has;
}

/// The SHA-256 of `certificate`'s SubjectPublicKeyInfo in DER (RFC 7469 §2.4). 1, or 0 when it cannot be encoded.
static int key_pin(X509 *certificate, uint8_t digest[32]) {
    unsigned char *der = NULL;
    int length = certificate ? i2d_X509_PUBKEY(X509_get_X509_PUBKEY(certificate), &der) : -1;
    if (length <= 0) return 0;
    unsigned int size = 0;
    int ok = EVP_Digest(der, (size_t)length, digest, &size, EVP_sha256(), NULL) && size == 32;
    OPENSSL_free(der);
    return ok;
}

static void note_subject(ctls_connection *connection, X509 *certificate) {
    connection->verify_subject[0] = 0;
    BIO *text = BIO_new(BIO_s_mem());
    if (certificate && text) {
        X509_NAME_print_ex(text, X509_get_subject_name(certificate), 0, XN_FLAG_RFC2253);
        int n = BIO_read(text, connection->verify_subject, sizeof connection->verify_subject - 1);
        connection->verify_subject[n > 0 ? n : 0] = 0;
    }
    BIO_free(text);
}

/// A pinned context's whole certificate check (SSL_CTX_set_cert_verify_callback): the leaf's key against the pins.
static int check_pins(X509_STORE_CTX *store, void *argument) {
    ctls_context *context = argument;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    ctls_connection *connection = ssl ? SSL_get_app_data(ssl) : NULL;
    X509 *leaf = X509_STORE_CTX_get0_cert(store);
    uint8_t digest[32];
    if (leaf && key_pin(leaf, digest)) {
        if (connection) {
            memcpy(connection->peer_pin, digest, 32);
            connection->has_peer_pin = 1;
        }
        for (size_t i = 0; i < context->pin_count; i++) {
            if (CRYPTO_memcmp(context->pins + 32 * i, digest, 32) == 0) {
                X509_STORE_CTX_set_error(store, X509_V_OK);
                return 1;
            }
        }
    }
    X509_STORE_CTX_set_error(store, CTLS_KEY_NOT_PINNED);
    if (connection) {
        connection->verify_error = CTLS_KEY_NOT_PINNED;
        note_subject(connection, leaf);
    }
    return 0;
}

int ctls_context_set_pins(ctls_context *context, const uint8_t *digests, size_t count) {
    if (count == 0) return 0;
    uint8_t *pins = malloc(32 * count);
    if (pins == NULL) return -1;
    memcpy(pins, digests, 32 * count);
    free(context->pins);
    context->pins = pins;
    context->pin_count = count;
    SSL_CTX_set_cert_verify_callback(context->ctx, check_pins, context);
    return 0;
}

int ctls_peer_pin(ctls_connection *connection, uint8_t digest[32]) {
    X509 *peer = SSL_get0_peer_certificate(connection->ssl);
    if (peer && key_pin(peer, digest)) return 1;
    if (!connection->has_peer_pin) return 0;
    memcpy(digest, connection->peer_pin, 32);
    return 1;
}

/// Notes the first certificate OpenSSL refused in the chain, and what for; OpenSSL's verdict stands.
static int note_verification(int ok, X509_STORE_CTX *store) {
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    ctls_connection *connection = ssl ? SSL_get_app_data(ssl) : NULL;
    if (!ok && connection && connection->verify_error == X509_V_OK) {
        connection->verify_error = X509_STORE_CTX_get_error(store);
        note_subject(connection, X509_STORE_CTX_get_current_cert(store));
        // The leaf's key, for a reason that offers to pin it (OpenSSL keeps no peer after a refusal).
        connection->has_peer_pin = key_pin(X509_STORE_CTX_get0_cert(store), connection->peer_pin);
    }
    return ok;
}

ctls_connection *ctls_connection_new(ctls_context *context, const char *sni, const char *host, const char *ip,
                                     char *error, size_t error_size) {
    ERR_clear_error();
    ctls_connection *connection = calloc(1, sizeof *connection);
    if (connection == NULL) {
        copy_text(error, error_size, "out of memory");
        return NULL;
    }
    connection->context = context;
    connection->ssl = SSL_new(context->ctx);
    if (connection->ssl == NULL) goto failed;
    connection->in = BIO_new(BIO_s_mem());
    connection->out = BIO_new(BIO_s_mem());
    if (connection->in == NULL || connection->out == NULL) {
        BIO_free(connection->in);
        BIO_free(connection->out);
        goto failed;
    }
    // An empty input is "try again", not the end of the stream.
    BIO_set_mem_eof_return(connection->in, -1);
    SSL_set_bio(connection->ssl, connection->in, connection->out);
    SSL_set_app_data(connection->ssl, connection);
    SSL_set_verify(connection->ssl, SSL_CTX_get_verify_mode(context->ctx), note_verification);
    if (sni && !SSL_set_tlsext_host_name(connection->ssl, sni)) goto failed;
    if (host) {
        SSL_set_hostflags(connection->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (!SSL_set1_host(connection->ssl, host)) goto failed;
    } else if (ip) {
        if (!X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(connection->ssl), ip)) goto failed;
    }
    pthread_mutex_lock(&context->lock);
    SSL_SESSION *session = context->session;
    context->session = NULL;  // single use (RFC 8446 §C.4)
    pthread_mutex_unlock(&context->lock);
    if (session) {
        SSL_set_session(connection->ssl, session);
        SSL_SESSION_free(session);
    }
    SSL_set_connect_state(connection->ssl);
    return connection;
failed:
    take_errors(error, error_size, "cannot make a TLS connection");
    if (connection->ssl) SSL_free(connection->ssl);
    free(connection);
    return NULL;
}

void ctls_connection_free(ctls_connection *connection) {
    if (connection == NULL) return;
    SSL_free(connection->ssl);  // frees both BIOs
    free(connection);
}

/// Empties the thread's error queue before an SSL call, as SSL_get_error needs it empty: only when it holds
/// something. OpenSSL 3.0's ERR_clear_error clears all 16 slots whatever they hold, about 870 instructions, which
/// every read and write of a DoT miss paid (BENCHMARKS.md, round 10); a peek at an empty queue costs a tenth.
static void clear_errors(void) {
    if (ERR_peek_error() != 0) ERR_clear_error();
}

int ctls_feed(ctls_connection *connection, const uint8_t *bytes, size_t length) {
    while (length > 0) {
        int chunk = length > 1 << 30 ? 1 << 30 : (int)length;
        int n = BIO_write(connection->in, bytes, chunk);
        if (n <= 0) return -1;
        bytes += n;
        length -= (size_t)n;
    }
    return 0;
}

/// The result of an SSL call that did not succeed: 0 to wait for more ciphertext, -2 closed, -1 failed.
static int settle(ctls_connection *connection, int result) {
    switch (SSL_get_error(connection->ssl, result)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        return -2;
    case SSL_ERROR_SYSCALL:
        take_errors(connection->error, sizeof connection->error, "unexpected end of the TLS stream");
        return -1;
    default:
        take_errors(connection->error, sizeof connection->error, "TLS failure");
        return -1;
    }
}

int ctls_handshake(ctls_connection *connection) {
    clear_errors();
    int result = SSL_do_handshake(connection->ssl);
    if (result == 1) return 1;
    int settled = settle(connection, result);
    return settled == -2 ? -1 : settled;
}

int ctls_read(ctls_connection *connection, uint8_t *buffer, size_t capacity) {
    clear_errors();
    int result = SSL_read(connection->ssl, buffer, capacity > 1 << 30 ? 1 << 30 : (int)capacity);
    if (result > 0) return result;
    return settle(connection, result);
}

int ctls_write(ctls_connection *connection, const uint8_t *bytes, size_t length) {
    clear_errors();
    if (length > 1 << 30) return -1;
    int result = SSL_write(connection->ssl, bytes, (int)length);
    if (result > 0) return result;
    settle(connection, result);
    return -1;
}

size_t ctls_pending(ctls_connection *connection) { return BIO_ctrl_pending(connection->out); }

size_t ctls_readable(ctls_connection *connection) {
    size_t n = (size_t)SSL_pending(connection->ssl) + BIO_ctrl_pending(connection->in);
    // Record bytes OpenSSL took from the BIO but has not processed (none without read-ahead, which is off, but a
    // reply must never wait for the next packet): their size is unknown, so a full record's room.
    if (n == 0 && SSL_has_pending(connection->ssl)) n = 16384;
    return n;
}

size_t ctls_take(ctls_connection *connection, uint8_t *buffer, size_t capacity) {
    int n = BIO_read(connection->out, buffer, capacity > 1 << 30 ? 1 << 30 : (int)capacity);
    return n > 0 ? (size_t)n : 0;
}

void ctls_shutdown(ctls_connection *connection) {
    ERR_clear_error();
    SSL_shutdown(connection->ssl);
    ERR_clear_error();
}

int ctls_session_reused(ctls_connection *connection) { return SSL_session_reused(connection->ssl); }

const char *ctls_version(ctls_connection *connection) { return SSL_get_version(connection->ssl); }

size_t ctls_alpn(ctls_connection *connection, char *buffer, size_t size) {
    const unsigned char *name = NULL;
    unsigned length = 0;
    SSL_get0_alpn_selected(connection->ssl, &name, &length);
    if (name == NULL || length == 0 || size == 0) return 0;
    if (length >= size) length = (unsigned)size - 1;
    memcpy(buffer, name, length);
    buffer[length] = 0;
    return length;
}

long ctls_verify_error(ctls_connection *connection) {
    if (connection->verify_error != X509_V_OK) return connection->verify_error;
    return SSL_get_verify_result(connection->ssl);
}

void ctls_failure(ctls_connection *connection, char *verify_text, size_t verify_size, char *subject,
                  size_t subject_size, char *error_text, size_t error_size) {
    long code = ctls_verify_error(connection);
    copy_text(verify_text, verify_size, code == X509_V_OK ? "" : X509_verify_cert_error_string(code));
    copy_text(subject, subject_size, connection->verify_subject);
    copy_text(error_text, error_size, connection->error);
}
