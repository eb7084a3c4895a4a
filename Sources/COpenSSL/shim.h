// OpenSSL's EVP interface, for AES-GCM on platforms without CryptoKit.
#include <openssl/evp.h>
#include <openssl/rand.h>
