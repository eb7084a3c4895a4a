#if canImport(CCurl)
import CCurl
import Foundation
import OutpostCore

/// One request on libcurl: its easy handle, the body it reads from, and the
/// answer as it arrives.
///
/// Made on the caller's thread, then handed to a ``CurlLoop`` through its
/// locked inbox; from then on only the loop's thread touches it (libcurl's
/// callbacks run there), except `cancellation`, which has its own lock.
final class CurlExchange: @unchecked Sendable {
    /// Who waits for this exchange, and for what.
    enum Waiter {
        /// `send`: the whole answer.
        case answer(CheckedContinuation<TransportResponse, any Error>)
        /// `openStream`: the head (nil once told), then the body's pieces.
        case stream(head: CheckedContinuation<TransportStream.Head, any Error>?, body: AsyncThrowingStream<Data, any Error>.Continuation)
    }

    /// The easy handle (`CURL *`).
    let handle: UnsafeMutableRawPointer
    /// Set before the exchange is handed to the loop.
    var waiter: Waiter?
    /// For a stream: the moment its head must have come by.
    let headDeadline: ContinuousClock.Instant?
    let headWait: TimeInterval
    /// Set by a cancellation that may come before the loop has the exchange.
    let cancellation = Locked<TransportError?>(nil)

    private let body: Data
    /// How much of `body` libcurl has taken.
    private var offset = 0
    private let progress: (@Sendable (RequestProgress) -> Void)?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>

    // The answer so far.
    private var status = 0
    private var headers: [String: String] = [:]
    private var headTold = false
    private var bodySentTold = false
    private var received = Data()
    private var finished = false
    private var closed = false

    /// Whether the answer's head has come (a stream's deadline no longer applies).
    var headArrivedYet: Bool { headTold }

    /// Builds the easy handle for `request`; `stream` makes it an open
    /// response whose head must come within `request.timeout`.
    init(
        _ request: TransportRequest, baseURL: URL, trustedCertificates: String?, stream: Bool,
        progress: (@Sendable (RequestProgress) -> Void)?
    ) throws {
        _ = curlIsReady
        guard let url = URL(string: request.target, relativeTo: baseURL)?.absoluteString,
            let handle = curl_easy_init()
        else {
            throw TransportError.notSent("the address \(request.target) is not valid")
        }
        self.handle = handle
        self.body = request.body ?? Data()
        self.progress = progress
        self.headWait = request.timeout
        self.headDeadline = stream ? .now + .milliseconds(Int64(request.timeout * 1000)) : nil
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        configure(request, url: url, trustedCertificates: trustedCertificates, stream: stream)
    }

    deinit { close() }

    private func configure(_ request: TransportRequest, url: String, trustedCertificates: String?, stream: Bool) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = outpost_curl_set_string(handle, CURLOPT_URL, url)
        // Threads: no alarm signals for DNS timeouts.
        _ = outpost_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = outpost_curl_set_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = outpost_curl_set_string(handle, CURLOPT_ACCEPT_ENCODING, "gzip, deflate")
        // A whole answer comes as it was sent and is inflated in one call
        // off the transport's thread (`CurlTransport`, `AnswerInflater`);
        // a stream's pieces are inflated by libcurl as they arrive.
        if !stream && AnswerInflater.isAvailable { _ = outpost_curl_set_long(handle, CURLOPT_HTTP_CONTENT_DECODING, 0) }
        _ = outpost_curl_set_long(handle, CURLOPT_TCP_KEEPALIVE, 1)
        if let trustedCertificates { _ = outpost_curl_set_string(handle, CURLOPT_CAINFO, trustedCertificates) }
        let milliseconds = max(1, Int(request.timeout * 1000))
        _ = outpost_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds)
        if stream {
            // A new connection, as URLSession's streams get: a kept-alive one
            // may be closing under a server or a proxy that times idle
            // connections out, which would end the channel as it opens.
            _ = outpost_curl_set_long(handle, CURLOPT_FRESH_CONNECT, 1)
        } else {
            // A stream's body never ends: only its head has a deadline (the loop's).
            _ = outpost_curl_set_long(handle, CURLOPT_TIMEOUT_MS, milliseconds)
        }

        _ = outpost_curl_set_data_callback(handle, CURLOPT_HEADERFUNCTION, curlHeaderLine)
        _ = outpost_curl_set_pointer(handle, CURLOPT_HEADERDATA, context)
        _ = outpost_curl_set_data_callback(handle, CURLOPT_WRITEFUNCTION, curlBodyPiece)
        _ = outpost_curl_set_pointer(handle, CURLOPT_WRITEDATA, context)

        var lines = request.headers.map { name, value in value.isEmpty ? "\(name);" : "\(name): \(value)" }
        // The body goes at once: no round trip waiting for "100 Continue".
        lines.append("Expect:")
        let names = Set(request.headers.keys.map { $0.lowercased() })
        switch request.method {
        case "GET": break
        case "HEAD": _ = outpost_curl_set_long(handle, CURLOPT_NOBODY, 1)
        case "PUT":
            _ = outpost_curl_set_long(handle, CURLOPT_UPLOAD, 1)
            _ = outpost_curl_set_size(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(body.count))
            // An attachment's piece, on a kept-alive connection: a new one
            // per piece (and the server closing it) cost a third of the
            // upload's speed on loopback. No seek callback: libcurl cannot
            // send a piece again by itself on a new connection when a reused
            // one died under it (the server may not yet have kept what the
            // dead one carried, and would store it twice); the transfer
            // fails and the engine asks the server where the upload stands.
            _ = outpost_curl_set_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, 512 * 1024)
        default:
            if request.method != "POST" { _ = outpost_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, request.method) }
            if request.method == "POST" || request.body != nil {
                _ = outpost_curl_set_long(handle, CURLOPT_POST, 1)
                _ = outpost_curl_set_size(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
                // Not libcurl's form default.
                if !names.contains("content-type") { lines.append("Content-Type:") }
                // A small request on a reused connection that turned out
                // closed is sent again by libcurl, from its start.
                _ = outpost_curl_set_seek_callback(handle, curlRewind)
                _ = outpost_curl_set_pointer(handle, CURLOPT_SEEKDATA, context)
            }
        }
        if request.method == "PUT" || request.method == "POST" || request.body != nil {
            _ = outpost_curl_set_data_callback(handle, CURLOPT_READFUNCTION, curlBodyOut)
            _ = outpost_curl_set_pointer(handle, CURLOPT_READDATA, context)
            // How much went out: tells `bodySent` once it all has.
            _ = outpost_curl_set_long(handle, CURLOPT_NOPROGRESS, 0)
            _ = outpost_curl_set_progress_callback(handle, curlTransferred)
            _ = outpost_curl_set_progress_context(handle, context)
        }
        for line in lines { headerList = curl_slist_append(headerList, line) }
        _ = outpost_curl_set_headers(handle, headerList)
        if !stream { received.reserveCapacity(16 * 1024) }
    }

    // MARK: libcurl's callbacks (on the loop's thread)

    fileprivate func headerLine(_ bytes: UnsafeRawBufferPointer) {
        guard !headTold else { return }  // trailers
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            // A new head (after an interim one): its own status and fields.
            status = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            headers = [:]
        } else if line.isEmpty {
            if status >= 200 || status == 0 { headArrived() }
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if let earlier = headers[name] { headers[name] = earlier + ", " + value } else { headers[name] = value }
        }
    }

    /// The head is whole: the waiter learns it before the body is read.
    private func headArrived() {
        headTold = true
        if status == 0 { status = outpost_curl_response_code(handle) }
        // A server may answer before it has read the whole body.
        bodyWentOut()
        progress?(.head(status))
        // The headers too, at once: a pull's next cursor is among them.
        progress?(.headers(headers))
        if case .stream(let head?, let body) = waiter {
            waiter = .stream(head: nil, body: body)
            head.resume(returning: TransportStream.Head(status: status, headers: headers))
        }
    }

    fileprivate func bodyWentOut() {
        guard !bodySentTold else { return }
        bodySentTold = true
        progress?(.bodySent)
    }

    fileprivate func bodyPiece(_ bytes: UnsafeRawBufferPointer) {
        if case .stream(_, let body) = waiter {
            body.yield(Data(bytes))
        } else {
            received.append(contentsOf: bytes)
        }
    }

    /// Copies the next bytes of the body into libcurl's buffer; 0 at its end.
    fileprivate func bodyOut(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = min(buffer.count, body.count - offset)
        guard count > 0 else { return 0 }
        body.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + offset, byteCount: count)
        }
        offset += count
        return count
    }

    fileprivate func rewind(to position: Int) -> Bool {
        guard position >= 0, position <= body.count else { return false }
        offset = position
        return true
    }

    fileprivate func transferred(uploadTotal: Int64, uploaded: Int64) {
        if uploadTotal > 0, uploaded >= uploadTotal { bodyWentOut() }
    }

    // MARK: The end (on the loop's thread)

    /// Resolves the waiter once: with the answer, or with `failure`.
    func finish(_ failure: TransportError?) {
        guard !finished else { return }
        finished = true
        let waiter = self.waiter
        self.waiter = nil
        switch waiter {
        case .answer(let continuation):
            if let failure {
                continuation.resume(throwing: failure)
            } else if !headTold {
                continuation.resume(throwing: TransportError.noAnswer("the connection closed before an answer"))
            } else {
                continuation.resume(returning: TransportResponse(status: status, headers: headers, body: received))
            }
        case .stream(let head, let body):
            if let failure {
                head?.resume(throwing: failure)
                body.finish(throwing: failure)
            } else {
                head?.resume(throwing: TransportError.noAnswer("the connection closed before an answer"))
                body.finish()
            }
        case nil:
            break
        }
    }

    /// What a failed transfer means to sync (see ``CurlTransport/classify(code:message:connected:)``).
    func failure(_ code: CURLcode) -> TransportError {
        let detail = errorBuffer.pointee == 0 ? String(cString: curl_easy_strerror(code)) : String(cString: errorBuffer)
        return CurlTransport.classify(
            code: Int(code.rawValue), message: detail, connected: outpost_curl_connect_time(handle) > 0, timeout: headWait)
    }

    /// Frees the handle; it must no longer be in a multi handle.
    func close() {
        guard !closed else { return }
        closed = true
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
        headerList = nil
        errorBuffer.deallocate()
    }
}

extension TransportStream {
    /// A stream's status and headers, as they arrived.
    struct Head: Sendable {
        var status: Int
        var headers: [String: String]
    }
}

/// libcurl's process-wide set-up, done once before the first handle.
let curlIsReady: Void = { _ = curl_global_init(outpost_curl_global_default) }()

private func exchange(_ context: UnsafeMutableRawPointer?) -> CurlExchange {
    Unmanaged<CurlExchange>.fromOpaque(context!).takeUnretainedValue()
}

private let curlHeaderLine: outpost_curl_data_callback = { buffer, size, count, context in
    exchange(context).headerLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
    return size * count
}

private let curlBodyPiece: outpost_curl_data_callback = { buffer, size, count, context in
    exchange(context).bodyPiece(UnsafeRawBufferPointer(start: buffer, count: size * count))
    return size * count
}

private let curlBodyOut: outpost_curl_data_callback = { buffer, size, count, context in
    exchange(context).bodyOut(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

private let curlRewind: outpost_curl_seek_callback = { context, offset, origin in
    guard origin == SEEK_SET, exchange(context).rewind(to: Int(offset)) else { return CURL_SEEKFUNC_CANTSEEK }
    return CURL_SEEKFUNC_OK
}

private let curlTransferred: outpost_curl_progress_callback = { context, _, _, uploadTotal, uploaded in
    exchange(context).transferred(uploadTotal: Int64(uploadTotal), uploaded: Int64(uploaded))
    return 0
}
#endif
