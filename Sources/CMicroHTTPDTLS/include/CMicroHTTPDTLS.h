#ifndef OUTPOST_MHD_TLS_H
#define OUTPOST_MHD_TLS_H

#include <stddef.h>
#include <stdint.h>

// Whether this libmicrohttpd was built with TLS (GnuTLS) support.
int outpost_tls_supported(void);

// Parses a PEM certificate chain and private key and makes them the ones
// handed to new TLS handshakes on `port`. Connections already open keep the
// credentials they started with. On failure returns 0 and writes why into
// `error`; the previous credentials stay in use.
int outpost_tls_install(uint16_t port, const char *cert_pem, size_t cert_length, const char *key_pem, size_t key_length,
                        char *error, size_t error_length);

// The handshake callback to pass as MHD_OPTION_HTTPS_CERT_CALLBACK (a
// gnutls_certificate_retrieve_function2 *), typed as an opaque pointer.
void *outpost_tls_certificate_callback(void);

#endif
