import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// What URLSession tells of a request before its answer is whole, against a
/// live server: the engine settles an answer only once the push behind it
/// is out, and sends that push on the answer's head, so both moments must
/// be told, once each and in order, whatever the answer.
@Suite("Request progress over URLSession", .timeLimit(.minutes(2)))
struct RequestProgressTests {
    /// Sends `body` to `/v1/push` and returns the status and every progress event, in order.
    static func push(_ body: Data, token: String?, to rig: LiveSyncRig) async throws -> (Int, [RequestProgress]) {
        let events = Locked<[RequestProgress]>([])
        var headers = ["Content-Type": "application/json"]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        let response = try await URLSessionTransport(baseURL: rig.base).send(
            TransportRequest(method: "POST", target: "/v1/push", headers: headers, body: body, timeout: 30)
        ) { event in events.withLock { $0.append(event) } }
        // The headers come right after the head, and are the answer's.
        let told = events.current
        guard case .headers(let given)? = told.last else {
            Issue.record("the answer's headers were not told last: \(told)")
            return (response.status, told)
        }
        #expect(given["x-request-id"] == response.headers["x-request-id"] && given["x-request-id"] != nil)
        return (response.status, Array(told.dropLast()))
    }

    @Test func aBodyReadWholeIsToldSentBeforeItsAnswersHead() async throws {
        let rig = try await LiveSyncRig()
        let token = try rig.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        // A megabyte the server reads to its end before refusing it.
        let body = Data(repeating: UInt8(ascii: "x"), count: 1 << 20)
        let (status, events) = try await Self.push(body, token: token, to: rig)
        #expect(status == 400)
        #expect(events == [.bodySent, .head(400)])
    }

    /// A server may answer from the headers alone (no credentials): the
    /// body never has to go whole, and a waiter for it must not wait for
    /// ever. It is told `bodySent` with the head.
    @Test func anAnswerFromTheHeadersAloneStillEndsTheWaitForTheBody() async throws {
        let rig = try await LiveSyncRig()
        let body = Data(repeating: UInt8(ascii: "x"), count: 1 << 20)
        let (status, events) = try await Self.push(body, token: nil, to: rig)
        #expect(status == 401)
        #expect(events == [.bodySent, .head(401)])
    }
}
