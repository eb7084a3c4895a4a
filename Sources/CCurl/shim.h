// libcurl for the Linux client transport. Swift cannot call C's variadic
// functions, so each kind of option value gets a typed setter here.
#ifndef OUTPOST_CCURL_SHIM_H
#define OUTPOST_CCURL_SHIM_H

#include <curl/curl.h>

/// Header, body and upload callbacks share one shape.
typedef size_t (*outpost_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);
/// Told how many bytes went each way; a non-zero return aborts the transfer.
typedef int (*outpost_curl_progress_callback)(void *context, curl_off_t downloadTotal, curl_off_t downloaded,
                                              curl_off_t uploadTotal, curl_off_t uploaded);
/// Rewinds the upload (the only seek curl asks for): CURL_SEEKFUNC_OK or CURL_SEEKFUNC_CANTSEEK.
typedef int (*outpost_curl_seek_callback)(void *context, curl_off_t offset, int origin);

static const long outpost_curl_global_default = CURL_GLOBAL_DEFAULT;

static inline CURLcode outpost_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode outpost_curl_set_size(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// Strings are copied by libcurl (every option this transport sets as a string).
static inline CURLcode outpost_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode outpost_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode outpost_curl_set_headers(CURL *handle, struct curl_slist *headers) {
    return curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
}

static inline CURLcode outpost_curl_set_data_callback(CURL *handle, CURLoption option, outpost_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode outpost_curl_set_progress_callback(CURL *handle, outpost_curl_progress_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

static inline CURLcode outpost_curl_set_progress_context(CURL *handle, void *context) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFODATA, context);
}

static inline CURLcode outpost_curl_set_seek_callback(CURL *handle, outpost_curl_seek_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_SEEKFUNCTION, callback);
}

static inline long outpost_curl_response_code(CURL *handle) {
    long code = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &code);
    return code;
}

/// Microseconds from the start to the connection being made; 0 when none was.
static inline curl_off_t outpost_curl_connect_time(CURL *handle) {
    curl_off_t time = 0;
    curl_easy_getinfo(handle, CURLINFO_CONNECT_TIME_T, &time);
    return time;
}

/// Bytes of the request body sent so far.
static inline curl_off_t outpost_curl_uploaded(CURL *handle) {
    curl_off_t size = 0;
    curl_easy_getinfo(handle, CURLINFO_SIZE_UPLOAD_T, &size);
    return size;
}

static inline CURLMcode outpost_curl_multi_set_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

#endif
