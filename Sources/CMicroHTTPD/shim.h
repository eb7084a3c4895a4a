#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

// Swift cannot call C variadic functions or some enum constants by name;
// these wrappers give the server fixed signatures.

#include <stdarg.h>
#include <stdio.h>

// libmicrohttpd's own messages, on stderr as one JSON object a line like
// every other line the server logs, except the ones every live stream
// causes when its client goes away ("…socket is no longer available for
// sending"): that is how a stream normally ends, not an error. Nor a line
// for each socket that ended before its request's headers did (the server
// cuts idle and trickling ones by the hundred during a flood).
#include <sys/time.h>
#include <time.h>
static void outpost_mhd_log(void *context, const char *format, va_list arguments) {
    (void)context;
    char line[512];
    vsnprintf(line, sizeof line, format, arguments);
    if (strstr(line, "no longer available for sending") != NULL) return;
    if (strstr(line, "closed when reading request") != NULL) return;
    if (strstr(line, "disconnected when reading request") != NULL) return;
    // The message as a JSON string: quotes, backslashes and control
    // characters escaped, the trailing newline dropped.
    char message[1100];
    size_t used = 0;
    for (const unsigned char *c = (const unsigned char *)line; *c != 0 && used + 7 < sizeof message; c++) {
        if (*c == '\n' && c[1] == 0) break;
        if (*c == '"' || *c == '\\') { message[used++] = '\\'; message[used++] = (char)*c; }
        else if (*c < 0x20) used += (size_t)snprintf(message + used, sizeof message - used, "\\u%04x", *c);
        else message[used++] = (char)*c;
    }
    message[used] = 0;
    struct timeval now;
    gettimeofday(&now, NULL);
    struct tm utc;
    gmtime_r(&now.tv_sec, &utc);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
    fprintf(stderr, "{\"time\":\"%s.%06ldZ\",\"level\":\"warning\",\"source\":\"libmicrohttpd\",\"message\":\"%s\"}\n",
            stamp, (long)now.tv_usec, message);
}

// An empty option array: what the TLS option slot holds when TLS is off.
static struct MHD_OptionItem outpost_mhd_no_options[] = {{MHD_OPTION_END, 0, NULL}};

// Starts a daemon with an internal epoll (elsewhere poll) thread pool and the limits Outpost needs.
// No per-address limit: the server counts connections by address itself
// (only those not yet authenticated), and answers a request over a limit.
static inline struct MHD_Daemon *outpost_mhd_start(
    uint16_t port, const char *bind_ip_v4, unsigned int threads,
    unsigned int connection_limit, unsigned int connection_timeout_seconds,
    MHD_AccessHandlerCallback handler, void *handler_context,
    MHD_RequestCompletedCallback completed, void *completed_context,
    MHD_NotifyConnectionCallback notify_connection, void *notify_connection_context, void *certificate_callback)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (bind_ip_v4 == NULL || inet_pton(AF_INET, bind_ip_v4, &addr.sin_addr) != 1) {
        return NULL;
    }
    // With a certificate callback (a gnutls_certificate_retrieve_function2 *): TLS on every connection.
#ifdef __linux__
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
#else
    // No epoll (macOS): libmicrohttpd picks the best it has, poll() or select().
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
#endif
    if (certificate_callback != NULL) flags |= MHD_USE_TLS;
    return MHD_start_daemon(
        flags,
        port, NULL, NULL, handler, handler_context,
        // Ignored without MHD_USE_TLS; MHD_OPTION_END-terminated either way.
        certificate_callback != NULL ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_ARRAY,
        certificate_callback != NULL ? certificate_callback : (void *)outpost_mhd_no_options,
        MHD_OPTION_EXTERNAL_LOGGER, outpost_mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
        MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, notify_connection_context,
        MHD_OPTION_END);
}

// A response whose bytes libmicrohttpd copies, so Swift may free its buffer at once.
static inline struct MHD_Response *outpost_mhd_copied_response(const void *bytes, size_t length) {
    return MHD_create_response_from_buffer(length, (void *)bytes, MHD_RESPMEM_MUST_COPY);
}

// An answer to HEAD: announces `length` bytes and has none (libmicrohttpd
// never reads a HEAD answer's body).
static ssize_t outpost_mhd_no_body(void *context, uint64_t position, char *buffer, size_t max) {
    (void)context; (void)position; (void)buffer; (void)max;
    return MHD_CONTENT_READER_END_OF_STREAM;
}
static inline struct MHD_Response *outpost_mhd_head_response(uint64_t length) {
    return MHD_create_response_from_callback(length, 4096, outpost_mhd_no_body, NULL, NULL);
}

// A response of unknown length whose body the reader callback produces as
// the socket can take it (a live stream).
static inline struct MHD_Response *outpost_mhd_stream_response(
    size_t block_size, MHD_ContentReaderCallback reader, void *context, MHD_ContentReaderFreeCallback free_context)
{
    return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block_size, reader, context, free_context);
}

// A response of known length whose body the reader callback produces in
// blocks as the socket takes them (a blob read from storage, never whole in memory).
static inline struct MHD_Response *outpost_mhd_sized_response(
    uint64_t size, size_t block_size, MHD_ContentReaderCallback reader, void *context,
    MHD_ContentReaderFreeCallback free_context)
{
    return MHD_create_response_from_callback(size, block_size, reader, context, free_context);
}

// What a content reader returns when storage failed mid-body: the connection is closed.
static inline ssize_t outpost_mhd_content_error(void) { return MHD_CONTENT_READER_END_WITH_ERROR; }

// What a content reader returns when the body is complete.
static inline ssize_t outpost_mhd_content_end(void) { return MHD_CONTENT_READER_END_OF_STREAM; }

// The port actually bound (useful with port 0).
static inline uint16_t outpost_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

// Connections open now, summed over the worker threads (a gauge: read without a lock).
static inline unsigned int outpost_mhd_open_connections(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

// How long this connection may stay silent from now on (the daemon's
// connection timeout, for this connection only).
static inline void outpost_mhd_set_idle_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

// The IPv4 address of the connection's peer as text into `buffer`; 0 when unknown.
static inline int outpost_mhd_peer_address(struct MHD_Connection *connection, char *buffer, socklen_t length) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || info->client_addr->sa_family != AF_INET) return 0;
    const struct sockaddr_in *address = (const struct sockaddr_in *)info->client_addr;
    return inet_ntop(AF_INET, &address->sin_addr, buffer, length) != NULL;
}

// The IPv4 address of the connection's peer as a number; 0 when unknown or not IPv4.
static inline uint32_t outpost_mhd_peer_ipv4(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || info->client_addr->sa_family != AF_INET) return 0;
    return ntohl(((const struct sockaddr_in *)info->client_addr)->sin_addr.s_addr);
}

// The connection's socket (for shutting it down from another thread: libmicrohttpd then closes it).
static inline int outpost_mhd_socket(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

// What the connection-notify callback stored for this connection.
static inline void *outpost_mhd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

// Whether a connection notification says it opened (else it closed).
static inline int outpost_mhd_connection_started(enum MHD_ConnectionNotificationCode code) {
    return code == MHD_CONNECTION_NOTIFY_STARTED;
}

// Enum constants Swift does not import by name.
static inline enum MHD_Result outpost_mhd_yes(void) { return MHD_YES; }
static inline enum MHD_Result outpost_mhd_no(void) { return MHD_NO; }
static inline enum MHD_ValueKind outpost_mhd_header_kind(void) { return MHD_HEADER_KIND; }
static inline enum MHD_ValueKind outpost_mhd_argument_kind(void) { return MHD_GET_ARGUMENT_KIND; }
