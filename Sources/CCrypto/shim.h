#ifndef CLOUDSYNC_CCRYPTO_SHIM_H
#define CLOUDSYNC_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
/* EVP digests are imported directly; nothing here is variadic. See https://www.openssl.org/docs/man3.0/man3/EVP_DigestInit.html */
#endif
