// A TLS client over system OpenSSL (libssl) with memory BIOs, for discoverd's DoT and DoH upstreams: the socket
// stays with SwiftNIO, this shim only turns ciphertext into plaintext and back. It exists for what swift-nio-ssl
// does not offer: client session resumption (README "Encrypted upstreams").
//
// Threads: a context may be used from any thread (its session slot has a mutex); a connection only from one
// thread at a time (discoverd: its channel's event loop).
#ifndef CTLSSHIM_H
#define CTLSSHIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct ctls_context ctls_context;
typedef struct ctls_connection ctls_connection;

/// A client context: TLS 1.2 at least, trust roots from `ca_file` (PEM), ALPN `alpn` in wire format (length-prefixed
/// names; NULL or 0 bytes: none), peer verification on (`verify` != 0) or off, and a one-session cache: the latest
/// session a server gave on any connection of this context is offered (once) by the next connection.
/// NULL on failure with the reason in `error`.
ctls_context *ctls_context_new(const char *ca_file, int verify, const uint8_t *alpn, size_t alpn_length,
                               char *error, size_t error_size);
void ctls_context_free(ctls_context *context);

/// Whether the context holds a session for the next connection (for tests).
int ctls_context_has_session(ctls_context *context);

/// Authenticates the servers of `context` by their key instead of the trust store: the SHA-256 of the leaf
/// certificate's SubjectPublicKeyInfo (DER) must be one of the `count` 32-byte digests at `digests` (RFC 7858 §4.2,
/// the pins of RFC 7469 §2.4, kdig's +tls-pin). The chain, its dates and the name are then not checked. Call before
/// the first connection. 0, or -1 when out of memory.
int ctls_context_set_pins(ctls_context *context, const uint8_t *digests, size_t count);

/// A connection of `context`. `sni`: the server name sent (NULL: none). `host`: the DNS name the certificate must
/// carry, or `ip`: the address (text) it must carry as an iPAddress subjectAltName; both NULL: only the chain is
/// checked (or nothing, for a context without verification). NULL on failure with the reason in `error`.
ctls_connection *ctls_connection_new(ctls_context *context, const char *sni, const char *host, const char *ip,
                                     char *error, size_t error_size);
void ctls_connection_free(ctls_connection *connection);

/// Hands ciphertext received from the server to the connection. 0, or -1 when out of memory.
int ctls_feed(ctls_connection *connection, const uint8_t *bytes, size_t length);

/// Runs the handshake as far as the ciphertext fed so far allows: 1 done, 0 needs more from the server, -1 failed
/// (see ctls_failure).
int ctls_handshake(ctls_connection *connection);

/// Plaintext from the server into `buffer`: > 0 bytes read, 0 none until more ciphertext comes, -1 failed,
/// -2 the server closed the TLS session (close_notify).
int ctls_read(ctls_connection *connection, uint8_t *buffer, size_t capacity);

/// Encrypts `length` bytes of plaintext for the server (> 0). `length` on success, -1 on failure.
int ctls_write(ctls_connection *connection, const uint8_t *bytes, size_t length);

/// Ciphertext waiting to be sent to the server: how many bytes, and takes up to `capacity` of them.
size_t ctls_pending(ctls_connection *connection);
size_t ctls_take(ctls_connection *connection, uint8_t *buffer, size_t capacity);

/// Bytes a read may still turn into plaintext: decrypted and not yet read, plus ciphertext not yet processed.
/// Zero means `ctls_read` can return nothing new (so it need not be called) and bounds what one read returns.
size_t ctls_readable(ctls_connection *connection);

/// Queues a close_notify alert (take it with ctls_take).
void ctls_shutdown(ctls_connection *connection);

/// After the handshake: whether the session was resumed, the protocol version ("TLSv1.3") and the ALPN protocol
/// agreed (NUL-terminated into `buffer`; 0 when none, else its length).
int ctls_session_reused(ctls_connection *connection);
const char *ctls_version(ctls_connection *connection);
size_t ctls_alpn(ctls_connection *connection, char *buffer, size_t size);

/// The verification error of a server key that matched none of the context's pins
/// (X509_V_ERR_APPLICATION_VERIFICATION).
enum { CTLS_KEY_NOT_PINNED = 50 };

/// After a failure: the X.509 verification error (X509_V_OK, 0, when the failure was not the certificate's), its
/// text, the subject of the certificate it concerns (RFC 2253, may be empty) and the OpenSSL error text otherwise.
long ctls_verify_error(ctls_connection *connection);
void ctls_failure(ctls_connection *connection, char *verify_text, size_t verify_size, char *subject,
                  size_t subject_size, char *error_text, size_t error_size);

/// The pin of the server's key: the SHA-256 of its leaf certificate's SubjectPublicKeyInfo (DER) into `digest`
/// (32 bytes). After the handshake, and after a refused certificate or key; 1 when known, else 0.
int ctls_peer_pin(ctls_connection *connection, uint8_t digest[32]);

#endif
