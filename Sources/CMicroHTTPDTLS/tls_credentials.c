// TLS credentials for libmicrohttpd's GnuTLS sessions, swappable while the
// server runs (SIGHUP reloads the certificate without closing a connection).
//
// libmicrohttpd asks for the certificate on every handshake through
// MHD_OPTION_HTTPS_CERT_CALLBACK; the callback finds the listening port of
// the session's socket and hands out that port's current credentials.
// Replaced credentials are kept, never freed: a session that started with
// them may still refer to them, and a reload is rare (a few KB each).

#include "CMicroHTTPDTLS.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define OUTPOST_TLS_MAX_CHAIN 16
#define OUTPOST_TLS_MAX_PORTS 64

struct outpost_tls_credentials {
    gnutls_pcert_st chain[OUTPOST_TLS_MAX_CHAIN];
    unsigned int chain_length;
    gnutls_privkey_t key;
};

static pthread_mutex_t outpost_tls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint16_t port;
    struct outpost_tls_credentials *current;
} outpost_tls_ports[OUTPOST_TLS_MAX_PORTS];

int outpost_tls_supported(void) { return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES; }

int outpost_tls_install(uint16_t port, const char *cert_pem, size_t cert_length, const char *key_pem, size_t key_length,
                        char *error, size_t error_length) {
    struct outpost_tls_credentials *credentials = calloc(1, sizeof *credentials);
    if (credentials == NULL) {
        snprintf(error, error_length, "out of memory");
        return 0;
    }
    gnutls_datum_t cert = {(unsigned char *)cert_pem, (unsigned int)cert_length};
    credentials->chain_length = OUTPOST_TLS_MAX_CHAIN;
    int status = gnutls_pcert_list_import_x509_raw(credentials->chain, &credentials->chain_length, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (status < 0 || credentials->chain_length == 0) {
        snprintf(error, error_length, "the certificate file is not a PEM certificate chain (%s)", gnutls_strerror(status));
        free(credentials);
        return 0;
    }
    gnutls_datum_t key = {(unsigned char *)key_pem, (unsigned int)key_length};
    status = gnutls_privkey_init(&credentials->key);
    if (status >= 0) status = gnutls_privkey_import_x509_raw(credentials->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (status < 0) {
        snprintf(error, error_length, "the key file is not an unencrypted PEM private key (%s)", gnutls_strerror(status));
        for (unsigned int i = 0; i < credentials->chain_length; i++) gnutls_pcert_deinit(&credentials->chain[i]);
        if (credentials->key != NULL) gnutls_privkey_deinit(credentials->key);
        free(credentials);
        return 0;
    }
    // The key must belong to the first certificate of the chain.
    gnutls_pubkey_t certificate_key = credentials->chain[0].pubkey;
    unsigned char probe[32] = {1, 2, 3};
    gnutls_datum_t probe_data = {probe, sizeof probe};
    gnutls_datum_t signature = {NULL, 0};
    int algorithm = gnutls_pubkey_get_pk_algorithm(certificate_key, NULL);
    gnutls_sign_algorithm_t sign = gnutls_pk_to_sign(algorithm, GNUTLS_DIG_SHA256);
    status = gnutls_privkey_sign_data2(credentials->key, sign, 0, &probe_data, &signature);
    if (status >= 0) status = gnutls_pubkey_verify_data2(certificate_key, sign, 0, &probe_data, &signature);
    gnutls_free(signature.data);
    if (status < 0) {
        snprintf(error, error_length, "the key does not belong to the certificate");
        for (unsigned int i = 0; i < credentials->chain_length; i++) gnutls_pcert_deinit(&credentials->chain[i]);
        gnutls_privkey_deinit(credentials->key);
        free(credentials);
        return 0;
    }

    pthread_mutex_lock(&outpost_tls_lock);
    int slot = -1;
    for (int i = 0; i < OUTPOST_TLS_MAX_PORTS; i++) {
        if (outpost_tls_ports[i].current != NULL && outpost_tls_ports[i].port == port) { slot = i; break; }
        if (slot < 0 && outpost_tls_ports[i].current == NULL) slot = i;
    }
    if (slot >= 0) {
        outpost_tls_ports[slot].port = port;
        outpost_tls_ports[slot].current = credentials;
    }
    pthread_mutex_unlock(&outpost_tls_lock);
    if (slot < 0) {
        snprintf(error, error_length, "more than %d TLS ports in one process", OUTPOST_TLS_MAX_PORTS);
        return 0;
    }
    return 1;
}

static int outpost_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *requested_names, int name_count,
                                const gnutls_pk_algorithm_t *algorithms, int algorithm_count, gnutls_pcert_st **chain,
                                unsigned int *chain_length, gnutls_privkey_t *key) {
    (void)requested_names;
    (void)name_count;
    (void)algorithms;
    (void)algorithm_count;
    int socket = gnutls_transport_get_int(session);
    struct sockaddr_in local;
    socklen_t length = sizeof local;
    if (getsockname(socket, (struct sockaddr *)&local, &length) != 0 || local.sin_family != AF_INET) return -1;
    uint16_t port = ntohs(local.sin_port);
    int found = -1;
    pthread_mutex_lock(&outpost_tls_lock);
    for (int i = 0; i < OUTPOST_TLS_MAX_PORTS; i++) {
        if (outpost_tls_ports[i].current != NULL && outpost_tls_ports[i].port == port) {
            *chain = outpost_tls_ports[i].current->chain;
            *chain_length = outpost_tls_ports[i].current->chain_length;
            *key = outpost_tls_ports[i].current->key;
            found = i;
            break;
        }
    }
    pthread_mutex_unlock(&outpost_tls_lock);
    return found >= 0 ? 0 : -1;
}

void *outpost_tls_certificate_callback(void) { return (void *)outpost_tls_retrieve; }
