#ifndef OUTPOST_MHD_ERROR_BODIES_H
#define OUTPOST_MHD_ERROR_BODIES_H

// Declared without <microhttpd.h>, so Swift sees one copy of its types (CMicroHTTPD's).
struct MHD_Connection;
struct MHD_Response;

// Queues one of the application's own responses untouched; returns MHD_YES (1) or MHD_NO (0).
int outpost_mhd_queue_own(struct MHD_Connection *connection, unsigned int status, struct MHD_Response *response);

#endif
