import Foundation
import OutpostCore

/// Whether the server reads compressed request bodies, as its last answer
/// said (`Accept-Encoding` on its answers): learnt from every answer, so a
/// server without it (an older one, or one behind the same address after a
/// rollback) is sent plain bodies from its first answer on. An encoded body
/// refused whole (servers of two versions behind one address) ends it for
/// the engine's life: each push would otherwise go twice.
final class RequestEncodings: Sendable {
    private struct State {
        var readsDeflate = false
        var refused = false
    }

    private let state = Locked(State())

    /// Bodies smaller than this go plain: deflating them saves too little.
    static let smallestDeflated = 1024

    /// Takes what an answer's `Accept-Encoding` says (nil when it had none).
    func learn(_ acceptEncoding: String?) {
        let codings = (acceptEncoding ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        state.withLock { $0.readsDeflate = codings.contains("deflate") && !$0.refused }
    }

    /// An encoded body was refused whole: plain bodies from now on.
    func forget() {
        state.withLock {
            $0.refused = true
            $0.readsDeflate = false
        }
    }

    /// `body` as it should be sent now; `earlier` (the same body prepared
    /// ahead) when what it chose still holds, since an answer that came
    /// meanwhile may have said otherwise.
    func prepare(_ body: Data, reusing earlier: OutgoingBody? = nil) -> OutgoingBody {
        let deflating = body.count >= Self.smallestDeflated && state.withLock { $0.readsDeflate }
        if let earlier, (earlier.encoding != nil) == deflating { return earlier }
        guard deflating, let deflated = BodyCompression.deflate(body) else { return OutgoingBody(plain: body, sent: body, encoding: nil) }
        return OutgoingBody(plain: body, sent: deflated, encoding: "deflate")
    }
}

/// A request body as it goes on the wire, with its plain form kept for a
/// resend to a server that turns the encoding down.
struct OutgoingBody: Sendable {
    let plain: Data
    let sent: Data
    /// `Content-Encoding`, nil for a plain body.
    let encoding: String?
}
