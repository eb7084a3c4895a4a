// libmicrohttpd answers some requests itself, before the application sees
// them: a request line or headers larger than the connection's memory pool
// (414, 431), a malformed request (400), an unsupported HTTP version (505).
// Version 0.9.75 offers no option or callback to shape those answers, and
// builds their bodies as fixed HTML. Every answer of an Outpost server must
// carry the protocol's JSON error body, so this file defines
// MHD_queue_response: the library calls it through the dynamic linker, so
// this definition in the program comes first, and it swaps the library's
// HTML for the JSON body of the same status, then queues it with the
// library's own function. The application's responses pass through untouched.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <microhttpd.h>
#include "CMicroHTTPDErrorBodies.h"

typedef enum MHD_Result (*queue_function)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

static _Thread_local int queuing_own_response = 0;

// Looked up once, before any thread of the server runs.
static queue_function library_queue = NULL;

__attribute__((constructor)) static void find_library_queue(void) {
    library_queue = (queue_function)dlsym(RTLD_NEXT, "MHD_queue_response");
}

static const char *json_body(unsigned int status) {
    switch (status) {
    case MHD_HTTP_BAD_REQUEST:
        return "{\"error\":{\"code\":\"invalid_request\",\"message\":\"The request is not valid HTTP/1.1.\"}}";
    case MHD_HTTP_CONTENT_TOO_LARGE:
        return "{\"error\":{\"code\":\"payload_too_large\",\"message\":\"The request body is larger than this server accepts.\"}}";
    case MHD_HTTP_URI_TOO_LONG:
        return "{\"error\":{\"code\":\"uri_too_long\",\"message\":\"The request's path and query are too long.\"}}";
    case MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE:
        return "{\"error\":{\"code\":\"headers_too_large\",\"message\":\"The request's headers are too large.\"}}";
    case MHD_HTTP_HTTP_VERSION_NOT_SUPPORTED:
        return "{\"error\":{\"code\":\"http_version_not_supported\",\"message\":\"This server speaks HTTP/1.0 and HTTP/1.1 only.\"}}";
    default:
        if (status >= 500) {
            return "{\"error\":{\"code\":\"internal_error\",\"message\":\"The server could not read this request. Please try again shortly.\"}}";
        }
        return "{\"error\":{\"code\":\"invalid_request\",\"message\":\"The server could not read this request.\"}}";
    }
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response) {
    queue_function library = library_queue;
    if (library == NULL) {
        return MHD_NO;
    }
    if (queuing_own_response || status < 400) {
        return library(connection, status, response);
    }
    const char *body = json_body(status);
    struct MHD_Response *json = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    if (json == NULL || MHD_add_response_header(json, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") == MHD_NO) {
        if (json != NULL) MHD_destroy_response(json);
        return library(connection, status, response);
    }
    enum MHD_Result queued = library(connection, status, json);
    // The library keeps its own reference to a queued response.
    MHD_destroy_response(json);
    return queued;
}

int outpost_mhd_queue_own(struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response) {
    queuing_own_response = 1;
    enum MHD_Result queued = MHD_queue_response(connection, status, response);
    queuing_own_response = 0;
    return queued == MHD_YES;
}
