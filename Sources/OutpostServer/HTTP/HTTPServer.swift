import CMicroHTTPD
import CMicroHTTPDErrorBodies
import CMicroHTTPDTLS
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import OutpostCore

/// The sync server on a real socket: libmicrohttpd with its own epoll thread
/// pool, a body-size limit, connection limits (in all, and per client
/// address for connections not yet authenticated; see `ConnectionGate`), a
/// deadline for request headers and an idle timeout. Each request is
/// answered by the handler on one of libmicrohttpd's threads and logged as
/// one JSON line (never bodies or tokens); a 5xx line also names its cause.
///
/// `@unchecked Sendable`: `daemon` is set once in `init` and cleared only in
/// `stop()` under `lock`; libmicrohttpd's threads only read the immutable
/// handler, limits and log through the context pointer.
public final class HTTPServer: @unchecked Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    /// A handler whose answer may wait (a long poll) or stream.
    public typealias LiveHandler = @Sendable (HTTPRequest) -> LiveAnswer
    public typealias Log = @Sendable (String) -> Void

    let handler: LiveHandler
    /// Run by `stop()` before the daemon stops: ends waiting connections.
    let drain: (@Sendable () -> Void)?
    let log: Log?
    /// Whether the request log also gets the health checks and scrapes that
    /// answered well (off by default: they were most of its lines, one every
    /// few seconds from each proxy and Prometheus).
    public var logsProbes: Bool {
        get { probesLogged.withLock { $0 } }
        set { probesLogged.withLock { $0 = newValue } }
    }
    private let probesLogged = Locked(false)
    /// Where answered requests are counted (the sync server's `/metrics`).
    let metrics: ServerMetrics?
    /// From a request's method, path and headers (built on demand): the
    /// upload that takes its body as it arrives, or nil to read the body
    /// whole (the sync server's route table decides).
    let uploads: (@Sendable (_ method: String, _ path: String, _ head: () -> HTTPRequest) -> BlobUpload.Start?)?
    let maxBodyBytes: Int
    /// Seconds a connection may stay silent within a request (its headers
    /// and body arriving).
    let idleWithinRequest: UInt32
    /// Seconds a connection may stay silent between an answer and its next
    /// request once half of a connection limit is taken (see
    /// `ConnectionGate`; until then, `idleWithinRequest`). A device's
    /// requests in one sync follow each other within milliseconds, and its
    /// next sync is minutes away: a socket kept longer only holds a slot of
    /// the limits (the address's share, behind an office NAT) that another
    /// device's stream needs. Measured with 500 devices on one address and
    /// the limit at 756, the kept-alive sockets of their syncs held the
    /// slots and 245 streams waited in the listen queue until they were
    /// given up for long polls.
    let idleBetweenRequests: UInt32
    /// Who holds the sockets, and who must make room (see `ConnectionGate`).
    let gate: ConnectionGate
    private var daemon: OpaquePointer?
    private let lock = NSLock()
    /// The server's periodic work beside the sockets (device sightings), stopped with them.
    private let housekeeping = Locked<(any DispatchSourceTimer)?>(nil)
    private let requestCounter = Counter()
    /// The port actually bound (useful with port 0).
    public private(set) var port: UInt16 = 0

    /// A server whose every answer is immediate.
    public convenience init(
        host: String = "127.0.0.1", port: UInt16, threads: Int = 8, maxBodyBytes: Int = 4 * 1024 * 1024,
        connections: ConnectionLimits = ConnectionLimits(), log: Log? = nil, tls: TLSFiles? = nil,
        handler: @escaping Handler
    ) throws {
        try self.init(
            host: host, port: port, threads: threads, maxBodyBytes: maxBodyBytes, connections: connections, log: log,
            tls: tls, trustedProxy: nil, drain: nil, metrics: nil, uploads: nil, live: { .now(handler($0)) })
    }

    /// The sync server on a socket, long polls and streams included; `stop()`
    /// ends them with `unavailable` first, so clients reconnect with jitter.
    /// With `tls`, every connection is HTTPS (libmicrohttpd's GnuTLS);
    /// with `trustedProxy`, the log names the client `X-Forwarded-For` gives
    /// when a request comes from that address.
    public convenience init(
        host: String = "127.0.0.1", port: UInt16, threads: Int = 8, maxBodyBytes: Int = 4 * 1024 * 1024,
        connections: ConnectionLimits = ConnectionLimits(), log: Log? = nil, tls: TLSFiles? = nil,
        trustedProxy: String? = nil, server: SyncServer
    ) throws {
        try self.init(
            host: host, port: port, threads: threads, maxBodyBytes: maxBodyBytes, connections: connections, log: log,
            tls: tls, trustedProxy: trustedProxy, drain: { server.closeLiveConnections() }, metrics: server.metrics,
            uploads: { server.streamedUpload(method: $0, path: $1, head: $2) }, live: { server.answer($0) })
        // Device sightings are written every 5 seconds off every request's
        // path: a pull never waits on that write, even while another
        // transaction holds the lock it needs.
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "outpost.sightings", qos: .utility))
        timer.schedule(deadline: .now() + 5, repeating: 5, leeway: .seconds(1))
        timer.setEventHandler { [weak server] in server?.writeSightings() }
        timer.resume()
        housekeeping.withLock { $0 = timer }
    }

    /// The certificate chain and key files `outpost serve --tls-cert --tls-key` name.
    public struct TLSFiles: Sendable, Equatable {
        public var certificate: String
        public var key: String
        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }

    /// Whether connections are HTTPS.
    public let tls: TLSFiles?
    /// The reverse proxy whose `X-Forwarded-For` is believed.
    let trustedProxy: String?

    init(
        host: String, port: UInt16, threads: Int, maxBodyBytes: Int, connections: ConnectionLimits, log: Log?,
        tls: TLSFiles?, trustedProxy: String?, drain: (@Sendable () -> Void)?, metrics: ServerMetrics?,
        uploads: (@Sendable (String, String, () -> HTTPRequest) -> BlobUpload.Start?)?, live: @escaping LiveHandler
    ) throws {
        self.uploads = uploads
        self.tls = tls
        self.trustedProxy = trustedProxy
        if tls != nil {
            guard outpost_tls_supported() != 0 else {
                throw ServeError(
                    "this libmicrohttpd was built without TLS (GnuTLS) support: install Debian's libmicrohttpd12, or serve plain HTTP behind a proxy that does TLS")
            }
        }
        // Known before the daemon starts when the port is given: no handshake can come first.
        if let tls, port != 0 { try Self.install(tls, port: port) }
        self.handler = live
        self.drain = drain
        self.metrics = metrics
        self.log = log
        self.maxBodyBytes = maxBodyBytes
        self.idleWithinRequest = UInt32(connections.idleTimeoutSeconds)
        self.idleBetweenRequests = UInt32(min(connections.idleTimeoutSeconds, Self.keepAliveSeconds))
        self.gate = ConnectionGate(
            total: connections.total, perAddress: connections.perAddress,
            headerDeadlineSeconds: connections.headerDeadlineSeconds)
        // libmicrohttpd may hold more than the total (the gate answers
        // those past it), as far as open files allow: out of them, it
        // stops accepting until a connection closes.
        let files = FileDescriptorLimit.raise(toAtLeast: connections.filesNeeded(threads: threads))
        let acceptLimit = min(connections.acceptLimit, max(connections.total, files - threads - 256))
        let context = Unmanaged.passUnretained(self).toOpaque()
        // libmicrohttpd 0.9.75 has no deadline for a request's headers to
        // arrive: its connection timeout is an idle timeout, restarted by
        // every byte, so a client trickling one header byte at a time keeps
        // its socket. The gate keeps that deadline, and the per-address
        // share of connections not yet authenticated, itself.
        guard
            let daemon = outpost_mhd_start(
                port, host, UInt32(max(1, threads)), UInt32(acceptLimit),
                UInt32(connections.idleTimeoutSeconds), Self.accessHandler, context, Self.completedHandler, context,
                Self.connectionHandler, context, tls == nil ? nil : outpost_tls_certificate_callback())
        else {
            gate.stop()
            throw ServeError("could not listen on \(host):\(port) (is the port in use, or the address not local?)")
        }
        self.daemon = daemon
        self.port = outpost_mhd_bound_port(daemon)
        if let tls, port == 0 {
            do {
                try Self.install(tls, port: self.port)
            } catch {
                stop()
                throw error
            }
        }
    }

    /// Reads the certificate and key again (SIGHUP): new connections get
    /// them, open ones keep theirs. On failure the old ones stay in use.
    public func reloadCertificate() throws {
        guard let tls else { return }
        try Self.install(tls, port: port)
    }

    private static func install(_ files: TLSFiles, port: UInt16) throws {
        guard let certificate = FileManager.default.contents(atPath: files.certificate) else {
            throw ServeError("cannot read the certificate file \(files.certificate)")
        }
        guard let key = FileManager.default.contents(atPath: files.key) else {
            throw ServeError("cannot read the key file \(files.key)")
        }
        var error = [CChar](repeating: 0, count: 256)
        let installed = certificate.withUnsafeBytes { cert in
            key.withUnsafeBytes { key in
                outpost_tls_install(
                    port, cert.baseAddress?.assumingMemoryBound(to: CChar.self), cert.count,
                    key.baseAddress?.assumingMemoryBound(to: CChar.self), key.count, &error, error.count)
            }
        }
        guard installed != 0 else {
            throw ServeError(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }

    deinit { stop() }

    /// Connections open now (accepted and not yet closed); 0 once stopped.
    package var openConnections: Int {
        lock.lock()
        defer { lock.unlock() }
        return daemon.map { Int(outpost_mhd_open_connections($0)) } ?? 0
    }

    /// Stops accepting connections, lets requests in progress finish, and
    /// releases the socket. Safe to call more than once.
    public func stop() {
        housekeeping.withLock { timer in
            timer?.cancel()
            timer = nil
        }
        gate.stop()
        lock.lock()
        let daemon = self.daemon
        self.daemon = nil
        lock.unlock()
        guard let daemon else { return }
        // Quiescing hands the listening socket back to us: close it, or the
        // kernel keeps accepting connections nobody will ever answer.
        let listener = MHD_quiesce_daemon(daemon)
        // Waiting connections are told the server is going (and parked ones
        // resumed) before the daemon closes what remains.
        drain?()
        MHD_stop_daemon(daemon)
        if listener >= 0 { close(listener) }
    }

    /// What one request accumulates between libmicrohttpd's calls.
    final class RequestState {
        /// The caller's `X-Request-Id` when it sent a usable one, else one made here.
        var requestID = ""
        /// The client's address: the socket's peer, or what a trusted proxy says it is.
        var client: String?
        var body = Data()
        var tooLarge = false
        let started = DispatchTime.now().uptimeNanoseconds
        /// A long poll parked on this connection, answered when it is resumed.
        var poll: LongPoll?
        /// A blob upload whose body goes to storage as it arrives.
        var upload: BlobUpload?
        /// A blob upload refused from its headers; its body is read and dropped.
        var refusal: HTTPResponse?
    }

    /// The headers the sync server reads.
    static let requestHeaders = [
        "Accept-Encoding", "Authorization", "Content-Type", "Content-Encoding", "Content-Length", "Content-Range", "Range", "Outpost-Schema", "Outpost-Client",
        "Outpost-Device", "Cookie", "Origin", "Host", "Sec-Fetch-Site", "X-CSRF-Token", "X-Forwarded-Proto",
    ]

    /// A connection libmicrohttpd lets us resume from any thread (the hub's
    /// wake-ups come from the thread that committed). A parked connection
    /// stays open until resumed, so the pointer is valid whenever the hub
    /// holds the resume.
    struct ConnectionHandle: @unchecked Sendable {
        let connection: OpaquePointer
        func suspend() { MHD_suspend_connection(connection) }
        func resume() { MHD_resume_connection(connection) }
    }

    /// A stream's state between libmicrohttpd's calls to its reader.
    final class StreamContext {
        let stream: LiveStream
        let handle: ConnectionHandle
        init(stream: LiveStream, handle: ConnectionHandle) {
            self.stream = stream
            self.handle = handle
        }
    }

    static let accessHandler: MHD_AccessHandlerCallback = {
        context, connection, url, method, _, uploadData, uploadDataSize, requestContext in
        guard let context, let connection, let requestContext, let uploadDataSize else { return outpost_mhd_no() }
        let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
        if requestContext.pointee == nil {
            // First call: headers only. Refuse an announced oversized body at once.
            let state = RequestState()
            if server.idleBetweenRequests < server.idleWithinRequest {
                // A request again: its body may pause as long as the limits allow.
                outpost_mhd_set_idle_timeout(connection, server.idleWithinRequest)
            }
            state.requestID = RequestID.given(
                MHD_lookup_connection_value(connection, outpost_mhd_header_kind(), "X-Request-Id").map { String(cString: $0) })
                ?? server.requestCounter.next()
            // Only the request log names the client.
            if server.log != nil { state.client = server.clientAddress(connection) }
            let methodName = method.map { String(cString: $0) } ?? "GET"
            let target = url.map { String(cString: $0) } ?? "/"
            if let refusal = server.admit(connection) {
                return server.refuse(refusal, on: connection, state: state, method: methodName, path: target)
            }
            if let start = server.uploads?(methodName, target, {
                HTTPRequest(method: methodName, path: target, headers: HTTPServer.headers(connection, HTTPServer.requestHeaders))
            }) {
                // A blob's body streams to storage, whatever its size up to the blob limit.
                switch start {
                case .accept(let upload):
                    // Accepted only once its token checked out.
                    state.upload = upload
                    server.proved(connection)
                case .refuse(let response, _): state.refusal = response
                }
                requestContext.pointee = Unmanaged.passRetained(state).toOpaque()
                return outpost_mhd_yes()
            }
            if let length = MHD_lookup_connection_value(connection, outpost_mhd_header_kind(), "Content-Length"),
                let bytes = Int(String(cString: length)), bytes > server.maxBodyBytes
            {
                state.tooLarge = true
            }
            requestContext.pointee = Unmanaged.passRetained(state).toOpaque()
            return outpost_mhd_yes()
        }
        let state = Unmanaged<RequestState>.fromOpaque(requestContext.pointee!).takeUnretainedValue()
        if uploadDataSize.pointee > 0, state.upload != nil || state.refusal != nil {
            if let upload = state.upload, let uploadData {
                upload.write(UnsafeRawBufferPointer(start: uploadData, count: uploadDataSize.pointee))
            }
            uploadDataSize.pointee = 0
            return outpost_mhd_yes()
        }
        if uploadDataSize.pointee > 0 {
            let size = uploadDataSize.pointee
            if !state.tooLarge, let uploadData {
                if state.body.count + size > server.maxBodyBytes {
                    state.tooLarge = true
                    state.body = Data()
                } else {
                    uploadData.withMemoryRebound(to: UInt8.self, capacity: size) { state.body.append($0, count: size) }
                }
            }
            uploadDataSize.pointee = 0
            return outpost_mhd_yes()
        }
        let methodText = method.map { String(cString: $0) } ?? "GET"
        let path = url.map { String(cString: $0) } ?? "/"
        var response: HTTPResponse
        let handle = ConnectionHandle(connection: connection)
        var longPoll = state.poll != nil
        if let refusal = state.refusal {
            response = refusal
        } else if let upload = state.upload {
            state.upload = nil
            response = upload.finish()
        } else if let poll = state.poll {
            // Resumed: the long poll was woken (a commit, a read again, its
            // wait ran out, or shutdown); with nothing for it yet, it waits on.
            guard let answer = poll.answerIfDue() ?? poll.parkOrAnswer({ handle.suspend() }, resume: { handle.resume() }) else {
                return outpost_mhd_yes()
            }
            state.poll = nil
            response = answer
        } else if state.tooLarge {
            response = SyncServer.errorResponse(
                APIError(.payloadTooLarge, "The request body is larger than \(server.maxBodyBytes / 1_048_576) MiB."),
                user: nil)
        } else {
            var request = HTTPRequest(
                method: methodText, path: path, query: HTTPServer.arguments(connection),
                headers: HTTPServer.headers(connection, HTTPServer.requestHeaders), body: state.body)
            request.fromSocket = true
            request.overTLS = server.tls != nil || server.forwardedOverTLS(connection)
            longPoll = request.query["wait"] != nil
            let answer = server.handler(request)
            if answer.authenticated { server.proved(connection) }
            switch answer {
            case .now(let answer):
                response = answer
            case .wait(let poll):
                state.poll = poll
                guard let answer = poll.parkOrAnswer({ handle.suspend() }, resume: { handle.resume() }) else { return outpost_mhd_yes() }
                state.poll = nil
                response = answer
            case .stream(let stream):
                return server.startStream(stream, on: handle, request: request, state: state)
            }
        }
        let requestID = state.requestID
        response.headers["X-Request-Id"] = requestID
        if response.status >= 400 { response.body = RequestID.stamped(response.body, requestID) }
        let queued = server.send(response, on: connection)
        let millis = Double(DispatchTime.now().uptimeNanoseconds - state.started) / 1_000_000
        RequestMetrics.answered(
            server.metrics, method: methodText, path: path, longPoll: longPoll, response: response, seconds: millis / 1000,
            requestID: requestID)
        if let log = server.log, server.logsProbes || !RequestLogLine.isProbe(path: path, status: response.status) {
            log(RequestLogLine(id: requestID, method: methodText, path: path, status: response.status,
                               milliseconds: millis, user: response.user, client: state.client,
                               cause: response.status >= 500 ? response.cause ?? "unknown" : nil).text)
        }
        return queued
    }

    /// The longest a connection waits for its next request after an answer
    /// while the connection limits are filling up.
    static let keepAliveSeconds = 2

    /// Tells the gate as connections open and close (its record of the
    /// connection is kept, retained, in the connection's socket context).
    static let connectionHandler: MHD_NotifyConnectionCallback = { context, connection, socketContext, code in
        guard let context, let connection, let socketContext else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
        if outpost_mhd_connection_started(code) != 0 {
            let gated = server.gate.opened(address: outpost_mhd_peer_ipv4(connection), socket: outpost_mhd_socket(connection))
            socketContext.pointee = Unmanaged.passRetained(gated).toOpaque()
        } else if let stored = socketContext.pointee {
            let gated = Unmanaged<GatedConnection>.fromOpaque(stored).takeRetainedValue()
            server.gate.closed(gated)
            socketContext.pointee = nil
        }
    }

    static let completedHandler: MHD_RequestCompletedCallback = { context, connection, requestContext, termination in
        if let context, let connection, let gated = gated(connection) {
            let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
            let crowded = server.gate.requestEnded(gated)
            // Answered in full (MHD_REQUEST_TERMINATED_COMPLETED_OK): the connection now waits for its next
            // request, briefly when the limits are filling up (see ConnectionGate).
            if termination.rawValue == 0, crowded, server.idleBetweenRequests < server.idleWithinRequest {
                outpost_mhd_set_idle_timeout(connection, server.idleBetweenRequests)
            }
        }
        guard let requestContext, let pointer = requestContext.pointee else { return }
        let state = Unmanaged<RequestState>.fromOpaque(pointer).takeRetainedValue()
        state.poll?.abandon()
        // Cut mid-body: the pieces that arrived stay, the next PUT resumes after them.
        state.upload?.abandon()
        requestContext.pointee = nil
    }

    /// Answers a request the gate refused, from its headers: `503` with
    /// `Retry-After` and the JSON error body, logged and counted like any
    /// answer. The connection closes after it, and libmicrohttpd reads none
    /// of the request's body (a slow body would hold the slot).
    func refuse(
        _ refusal: ConnectionGate.Refusal, on connection: OpaquePointer, state: RequestState, method: String, path: String
    ) -> MHD_Result {
        var response = SyncServer.errorResponse(refusal.error, user: nil, cause: refusal.cause)
        response.headers["Connection"] = "close"
        response.headers["X-Request-Id"] = state.requestID
        response.body = RequestID.stamped(response.body, state.requestID)
        let queued = send(response, on: connection)
        let millis = Double(DispatchTime.now().uptimeNanoseconds - state.started) / 1_000_000
        let longPoll = MHD_lookup_connection_value(connection, outpost_mhd_argument_kind(), "wait") != nil
        RequestMetrics.answered(
            metrics, method: method, path: path, longPoll: longPoll, response: response, seconds: millis / 1000,
            requestID: state.requestID)
        if let log {
            log(RequestLogLine(id: state.requestID, method: method, path: path, status: response.status,
                               milliseconds: millis, user: nil, client: state.client, cause: response.cause).text)
        }
        return queued
    }

    /// Answers `200 text/event-stream` and hands the body to the stream's reader.
    private func startStream(
        _ stream: LiveStream, on handle: ConnectionHandle, request: HTTPRequest, state: RequestState
    ) -> MHD_Result {
        let context = Unmanaged.passRetained(StreamContext(stream: stream, handle: handle)).toOpaque()
        guard let response = outpost_mhd_stream_response(16 * 1024, Self.streamReader, context, Self.streamFreed) else {
            Unmanaged<StreamContext>.fromOpaque(context).release()
            stream.finished()
            return outpost_mhd_no()
        }
        defer { MHD_destroy_response(response) }
        let requestID = state.requestID
        for (name, value) in streamHeaders { _ = MHD_add_response_header(response, name, value) }
        _ = MHD_add_response_header(response, "Vary", "Accept-Encoding")
        // The stream compresses its own events (shared between streams), as its request allowed.
        if let coding = stream.contentEncoding { _ = MHD_add_response_header(response, "Content-Encoding", coding) }
        _ = MHD_add_response_header(response, "X-Request-Id", requestID)
        let millis = Double(DispatchTime.now().uptimeNanoseconds - state.started) / 1_000_000
        RequestMetrics.answered(
            metrics, method: request.method, path: request.path, longPoll: false, response: HTTPResponse(status: 200),
            seconds: millis / 1000, requestID: requestID)
        if let log {
            log(RequestLogLine(id: requestID, method: request.method, path: request.path, status: 200, milliseconds: millis,
                               user: stream.connection.interest.principal.user, client: state.client).text)
        }
        return MHD_queue_response(handle.connection, 200, response)
    }

    static let streamReader: MHD_ContentReaderCallback = { context, _, buffer, capacity in
        guard let context, let buffer else { return outpost_mhd_content_end() }
        let stream = Unmanaged<StreamContext>.fromOpaque(context).takeUnretainedValue()
        let handle = stream.handle
        switch stream.stream.read(into: buffer, capacity: capacity, park: { handle.suspend() }, resume: { handle.resume() }) {
        case .bytes(let count): return count
        case .parked: return 0
        case .end: return outpost_mhd_content_end()
        }
    }

    static let bodyReader: MHD_ContentReaderCallback = { context, position, buffer, capacity in
        guard let context, let buffer else { return outpost_mhd_content_error() }
        let reader = Unmanaged<ResponseBodyReader>.fromOpaque(context).takeUnretainedValue()
        let remaining = reader.length - Int64(position)
        guard remaining > 0 else { return outpost_mhd_content_end() }
        let count = Int(min(Int64(capacity), remaining))
        guard let read = reader.read(Int64(position), UnsafeMutableRawBufferPointer(start: buffer, count: count)), read > 0 else {
            return outpost_mhd_content_error()
        }
        return read
    }

    static let bodyFreed: MHD_ContentReaderFreeCallback = { context in
        guard let context else { return }
        Unmanaged<ResponseBodyReader>.fromOpaque(context).takeRetainedValue().finished()
    }

    static let streamFreed: MHD_ContentReaderFreeCallback = { context in
        guard let context else { return }
        Unmanaged<StreamContext>.fromOpaque(context).takeRetainedValue().stream.finished()
    }

    private func send(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
        let response = AnswerCompression.encoded(
            response,
            acceptEncoding: MHD_lookup_connection_value(connection, outpost_mhd_header_kind(), "Accept-Encoding").map { String(cString: $0) })
        let mhdResponse: OpaquePointer?
        if let reader = response.bodyReader {
            let context = Unmanaged.passRetained(reader).toOpaque()
            mhdResponse = outpost_mhd_sized_response(UInt64(reader.length), 64 * 1024, Self.bodyReader, context, Self.bodyFreed)
            if mhdResponse == nil { Unmanaged<ResponseBodyReader>.fromOpaque(context).release() }
        } else {
            mhdResponse =
                response.declaredLength.map { outpost_mhd_head_response(UInt64($0)) }
                ?? response.body.withUnsafeBytes { bytes in outpost_mhd_copied_response(bytes.baseAddress, bytes.count) }
        }
        guard let mhdResponse else { return outpost_mhd_no() }
        defer { MHD_destroy_response(mhdResponse) }
        for (name, value) in response.headers {
            _ = MHD_add_response_header(mhdResponse, name, value)
        }
        // Ours already carry the JSON error body: queued past the replacement of libmicrohttpd's own.
        return outpost_mhd_queue_own(connection, UInt32(response.status), mhdResponse) == 1 ? outpost_mhd_yes() : outpost_mhd_no()
    }

    /// Who sent the request: the socket's peer, unless the peer is the
    /// trusted proxy and says who it forwards for (the last address of
    /// `X-Forwarded-For`, the one the proxy itself appended; earlier ones
    /// are the client's to write).
    func clientAddress(_ connection: OpaquePointer) -> String? {
        guard let peer = Self.peerAddress(connection) else { return nil }
        guard let trustedProxy, peer == trustedProxy,
            let forwarded = Self.lastValue(connection, header: "X-Forwarded-For"),
            let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces),
            !last.isEmpty, last.utf8.count <= 64, last.utf8.allSatisfy({ $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: ":") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || ($0 >= 0x41 && $0 <= 0x46) })
        else { return peer }
        return last
    }

    /// Whether the client reached the trusted proxy over HTTPS, as the proxy
    /// says in `X-Forwarded-Proto`: only the proxy's own connections count,
    /// since any client can write the header too.
    func forwardedOverTLS(_ connection: OpaquePointer) -> Bool {
        guard let trustedProxy, Self.peerAddress(connection) == trustedProxy,
            let proto = Self.lastValue(connection, header: "X-Forwarded-Proto")
        else { return false }
        return proto.trimmingCharacters(in: .whitespaces).lowercased() == "https"
    }

    /// The socket's peer address, as text.
    private static func peerAddress(_ connection: OpaquePointer) -> String? {
        var buffer = [CChar](repeating: 0, count: 64)
        guard outpost_mhd_peer_address(connection, &buffer, socklen_t(buffer.count)) != 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The last line of a header sent more than once: a proxy that appends
    /// (haproxy's `option forwardfor`) adds its own line after any the
    /// client wrote, and libmicrohttpd's lookup gives the first.
    private static func lastValue(_ connection: OpaquePointer, header: String) -> String? {
        final class Box {
            let name: String
            var last: String?
            init(_ name: String) { self.name = name }
        }
        let box = Box(header.lowercased())
        let iterator: MHD_KeyValueIterator = { context, _, key, value in
            guard let context, let key, let value else { return outpost_mhd_yes() }
            let box = Unmanaged<Box>.fromOpaque(context).takeUnretainedValue()
            if String(cString: key).lowercased() == box.name { box.last = String(cString: value) }
            return outpost_mhd_yes()
        }
        withExtendedLifetime(box) {
            _ = MHD_get_connection_values(
                connection, outpost_mhd_header_kind(), iterator, Unmanaged.passUnretained(box).toOpaque())
        }
        return box.last
    }

    /// The decoded query arguments of the request.
    private static func arguments(_ connection: OpaquePointer) -> [String: String] {
        final class Box { var values: [String: String] = [:] }
        let box = Box()
        let iterator: MHD_KeyValueIterator = { context, _, key, value in
            guard let context, let key else { return outpost_mhd_yes() }
            let box = Unmanaged<Box>.fromOpaque(context).takeUnretainedValue()
            box.values[String(cString: key)] = value.map { String(cString: $0) } ?? ""
            return outpost_mhd_yes()
        }
        withExtendedLifetime(box) {
            _ = MHD_get_connection_values(
                connection, outpost_mhd_argument_kind(), iterator, Unmanaged.passUnretained(box).toOpaque())
        }
        return box.values
    }

    private static func headers(_ connection: OpaquePointer, _ names: [String]) -> [String: String] {
        var headers: [String: String] = [:]
        for name in names {
            if let value = MHD_lookup_connection_value(connection, outpost_mhd_header_kind(), name) {
                headers[name.lowercased()] = String(cString: value)
            }
        }
        return headers
    }
}

/// `outpost serve` could not start.
public struct ServeError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
