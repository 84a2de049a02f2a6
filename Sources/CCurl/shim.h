#ifndef CLOUDSYNC_CCURL_SHIM_H
#define CLOUDSYNC_CCURL_SHIM_H
#include <curl/curl.h>
#include <malloc.h>

/* Non-variadic wrappers: Swift cannot call the variadic curl_easy_setopt / curl_easy_getinfo.
   One per argument type; see https://curl.se/libcurl/c/curl_easy_setopt.html */
static inline CURLcode cloudsync_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cloudsync_curl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cloudsync_curl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cloudsync_curl_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cloudsync_curl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cloudsync_curl_setopt_write(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode cloudsync_curl_setopt_header(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode cloudsync_curl_setopt_read(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_READFUNCTION, f); }
static inline CURLcode cloudsync_curl_setopt_xferinfo(CURL *h, int (*f)(void *, curl_off_t, curl_off_t, curl_off_t, curl_off_t)) { return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, f); }
static inline CURLcode cloudsync_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode cloudsync_curl_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode cloudsync_curl_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode cloudsync_curl_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLSHcode cloudsync_curl_share_setopt_long(CURLSH *s, CURLSHoption o, long v) { return curl_share_setopt(s, o, v); }
static inline CURLMcode cloudsync_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode cloudsync_curl_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
/* Macros Swift cannot import (composite expressions). */
static inline CURLcode cloudsync_curl_global_init_all(void) { return curl_global_init(CURL_GLOBAL_ALL); }
static inline CURLcode cloudsync_curl_unpause(CURL *h) { return curl_easy_pause(h, CURLPAUSE_CONT); }
static inline size_t cloudsync_curl_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
/* glibc's allocator: keep a freed heap top of up to 4 MiB for reuse, and serve blocks under 1 MiB from the heap
   (mallopt(3)), so per-transfer buffers are not unmapped and faulted in again. Nonzero when both were taken. */
static inline int cloudsync_keep_freed_memory(void) {
    return mallopt(M_TRIM_THRESHOLD, 4 << 20) && mallopt(M_MMAP_THRESHOLD, 1 << 20);
}
#endif
