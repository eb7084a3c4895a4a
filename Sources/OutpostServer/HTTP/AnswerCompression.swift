import Foundation
package import OutpostCore

/// Answers sent gzip- or deflate-encoded when the request's
/// `Accept-Encoding` allows it. A first download is 451 bytes of JSON a
/// record and about a tenth of that compressed: on a 10 Mbit/s mobile link,
/// 85 s against 8 s for 235,613 records.
///
/// Blob downloads are never encoded here: their bodies are read from
/// storage as stored, and a `Range` counts stored bytes.
package enum AnswerCompression {
    /// Bodies smaller than this go plain: a packet or two either way.
    package static let minimumBytes = 1024

    /// libdeflate's level for whole answers and pages built ahead: the
    /// cheapest whose bytes stay within 1.10x of zlib level 6's on pages of
    /// records (docs/benchmarks.md).
    package static let level: Int32 = 3

    /// zlib's level for streams' events, each deflated once and ended by a
    /// full flush (libdeflate cannot end a piece without ending the
    /// stream): level 4 keeps within 1.15x of level 6's bytes, levels 1 to
    /// 3 give 1.19-1.24x.
    package static let streamLevel: Int32 = 4

    /// The coding `acceptEncoding` allows, preferring gzip when both are
    /// allowed alike; nil for a plain answer (no header, `identity`, or
    /// both refused with `q=0`). A coding not named is refused unless `*`
    /// allows it; a q-value that is not a number refuses its coding.
    package static func negotiate(_ acceptEncoding: String?) -> DeflateFormat? {
        guard BodyCompression.isAvailable, let acceptEncoding else { return nil }
        var weights: [String: Double] = [:]
        for item in acceptEncoding.split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let name = parts.first, !name.isEmpty else { continue }
            var weight = 1.0
            for parameter in parts.dropFirst() where parameter.hasPrefix("q=") {
                weight = Double(parameter.dropFirst(2)).flatMap { (0...1).contains($0) ? $0 : nil } ?? 0
            }
            weights[name == "x-gzip" ? "gzip" : name] = weight
        }
        func weight(_ name: String) -> Double { weights[name] ?? weights["*"] ?? 0 }
        let gzip = weight("gzip")
        let deflate = weight("deflate")
        let best = max(gzip, deflate)
        // Plain wins only when asked for by name with a higher weight.
        guard best > 0, (weights["identity"] ?? 0) <= best else { return nil }
        return gzip >= deflate ? .gzip : .deflate
    }

    /// `body` in `format`, with a compressor from the pool.
    package static func compress(_ body: [UInt8], as format: DeflateFormat) -> [UInt8]? {
        guard let deflater = pool.take() else { return nil }
        defer { pool.give(deflater) }
        return deflater.compress(body, as: format)
    }

    /// An answer as it goes on a socket whose request said `acceptEncoding`:
    /// encoded when it is large enough, allowed, not already encoded and not
    /// a blob's bytes (a body read from storage, or any `Range` answer).
    static func encoded(_ response: HTTPResponse, acceptEncoding: String?) -> HTTPResponse {
        guard response.bodyReader == nil, response.declaredLength == nil, response.body.count >= minimumBytes,
            !response.headers.keys.contains(where: { exempt.contains($0.lowercased()) })
        else { return response }
        var response = response
        if let vary = response.headers.first(where: { $0.key.lowercased() == "vary" }) {
            response.headers[vary.key] = vary.value + ", Accept-Encoding"
        } else {
            response.headers["Vary"] = "Accept-Encoding"
        }
        guard let format = negotiate(acceptEncoding), let body = compress(response.body, as: format) else { return response }
        response.body = body
        response.headers["Content-Encoding"] = format.rawValue
        return response
    }

    /// Headers that say an answer must go as it is: already encoded, or a
    /// range of stored bytes.
    private static let exempt: Set<String> = ["content-encoding", "content-range", "accept-ranges"]

    /// Compressors kept between answers (each holds its own tables, worth
    /// reusing); as many as answers compressed at once.
    private static let pool = AnswerDeflaterPool(level: level)
}
