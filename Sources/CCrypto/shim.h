#ifndef CLOUDSYNC_CCRYPTO_SHIM_H
#define CLOUDSYNC_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#endif
