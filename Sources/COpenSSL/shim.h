// OpenSSL's EVP interface: AES-GCM on platforms without CryptoKit, and the
// server's JWT signature checks (public keys read from DER).
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/err.h>
