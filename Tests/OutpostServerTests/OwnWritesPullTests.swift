import Foundation
import OutpostCore
@testable import OutpostServer
import OutpostTesting
import Testing

/// A pull that names the caller's client and the seq through which its
/// store holds the answers of its own changes leaves out the records whose
/// current state one of those changes wrote, and only those: nothing
/// another user or another client wrote, nothing written after, nothing a
/// later write changed; and its cursor still passes them.
@Suite("A pull without the caller's own writes", .timeLimit(.minutes(5)))
struct OwnWritesPullTests {
    static func uuids(_ changes: [PullChange]) -> Set<UUID> { Set(changes.map(\.uuid)) }

    @Test(arguments: Backend.available)
    func onlyTheCallersHeldWritesAreLeftOut(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1", .coordinator, team: "t-1")
        let bea = try live.token("u-2", .coordinator, team: "t-1")
        let admin = try live.token("a-1", .admin, team: "hq")
        let phone = TestDevice()
        let tablet = TestDevice()
        let (a, b, c, d, x) = (UUID(), UUID(), UUID(), UUID(), UUID())
        // Ana's phone: four creates, seqs 1-4.
        for uuid in [a, b, c, d] {
            _ = try await live.push(phone.request(phone.mutation(.create, uuid: uuid, data: ["name": "from the phone"])), token: ana)
        }
        // Bea's tablet creates x and edits a: a's state is Bea's now.
        _ = try await live.push(tablet.request(tablet.mutation(.create, uuid: x, data: ["name": "from the tablet"])), token: bea)
        let base = try #require(try await live.pullAll(token: ana, query: "&collections=people").changes.first { $0.uuid == a })
        guard case .record(let copy) = base else { throw CancellationError() }
        _ = try await live.push(tablet.request(tablet.mutation(.update, uuid: a, base: copy.version, data: ["phone": "1"])), token: bea)
        // The phone edits x (seq 5); an administrator reassigns d (no push).
        _ = try await live.push(phone.request(phone.mutation(.update, uuid: x, data: ["phone": "2"])), token: ana)
        let assigned = try await live.send(
            "POST", "/v1/records/people/\(d.wireText)/assign", token: admin, body: Data(#"{"owner": "u-2", "team": "t-1"}"#.utf8))
        #expect(assigned.status == 200, "\(assigned.text)")

        let everything = try await live.pullAll(token: ana, limit: 2, query: "&collections=people")
        #expect(Self.uuids(everything.changes) == [a, b, c, d, x])
        func own(_ client: UUID, through: Int64) -> String { "&collections=people&client_id=\(client.wireText)&own_through=\(through)" }

        // Held through 4: b and c are the phone's and held; a and d were
        // changed since by others, x by the phone's seq 5, not held.
        for limit in [1, 2, 1000] {
            let left = try await live.pullAll(token: ana, limit: limit, query: own(phone.clientID, through: 4))
            #expect(Self.uuids(left.changes) == [a, d, x], "limit \(limit)")
            #expect(left.cursor == everything.cursor, "the cursor passes the writes left out (limit \(limit))")
        }
        let throughFive = try await live.pullAll(token: ana, limit: 2, query: own(phone.clientID, through: 5))
        #expect(Self.uuids(throughFive.changes) == [a, d])
        let throughTwo = try await live.pullAll(token: ana, limit: 2, query: own(phone.clientID, through: 2))
        #expect(Self.uuids(throughTwo.changes) == [a, c, d, x])
        // Another client of the same user, or the phone's client id under
        // another user, holds nothing of these.
        #expect(Self.uuids(try await live.pullAll(token: ana, query: own(tablet.clientID, through: 99)).changes) == [a, b, c, d, x])
        #expect(Self.uuids(try await live.pullAll(token: bea, query: own(phone.clientID, through: 99)).changes) == [a, b, c, d, x])
    }

    /// The page after one that left the caller's writes out is built ahead
    /// for that request alone: a pull from the same cursor without them
    /// still gets every change.
    @Test(arguments: Backend.available)
    func aPageBuiltAheadWithoutTheCallersWritesIsNoOneElses(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1")
        let phone = TestDevice()
        var made: [UUID] = []
        for _ in 0..<20 {
            let uuid = UUID()
            made.append(uuid)
            _ = try await live.push(phone.request(phone.mutation(.create, uuid: uuid, data: ["name": "P"])), token: ana)
        }
        let first = try await live.get(
            "/v1/pull?collections=people&limit=1&client_id=\(phone.clientID.wireText)&own_through=20", token: ana)
        #expect(first.status == 200, "\(first.text)")
        let page = try first.decode(PullResponse.self)
        let passed = PullService.OwnWrites.weightOfWritten
        #expect(page.changes.isEmpty && page.hasMore, "\(passed) of the phone's writes passed over")
        let rest = try await live.pullAll(token: ana, cursor: page.cursor, limit: 1, query: "&collections=people")
        #expect(Self.uuids(rest.changes) == Set(made[passed...]))
    }

    /// Writes left out weigh a fraction of a written change against the
    /// limit: the pull after a device's own long push is a page or two,
    /// not one per `limit` of its own records; a page still writes at most
    /// `limit` changes, and the cursor ends where a plain pull's does.
    @Test(arguments: Backend.available)
    func writesLeftOutWeighLessThanWrittenOnes(_ backend: Backend) async throws {
        let live = try LiveServer(backend)
        let ana = try live.token("u-1")
        let phone = TestDevice()
        let tablet = TestDevice()
        var theirs: Set<UUID> = []
        for index in 0..<45 {
            _ = try await live.push(phone.request(phone.mutation(.create, data: ["name": .string("mine \(index)")])), token: ana)
            if index % 15 == 14 {
                let uuid = UUID()
                theirs.insert(uuid)
                _ = try await live.push(tablet.request(tablet.mutation(.create, uuid: uuid, data: ["name": "theirs"])), token: ana)
            }
        }
        let plain = try await live.pullAll(token: ana, limit: 2, query: "&collections=people")
        #expect(plain.changes.count == 48)

        var cursor: PullCursor?
        var pages: [Int] = []
        var received: Set<UUID> = []
        repeat {
            var target = "/v1/pull?collections=people&limit=2&client_id=\(phone.clientID.wireText)&own_through=45"
            if let cursor { target += "&cursor=\(cursor.rawValue)" }
            let answer = try await live.get(target, token: ana)
            #expect(answer.status == 200, "\(answer.text)")
            let page = try answer.decode(PullResponse.self)
            pages.append(page.changes.count)
            received.formUnion(Self.uuids(page.changes))
            cursor = page.cursor
            if !page.hasMore { break }
        } while pages.count < 30
        #expect(received == theirs)
        #expect(pages.allSatisfy { $0 <= 2 }, "no page writes more than its limit: \(pages)")
        // Counted in full, 48 entries at 2 a page are 24 pages; 45 left out
        // weigh less than three written changes.
        #expect(pages.count <= 4, "\(pages)")
        #expect(cursor == plain.cursor, "the cursor passes every write left out")
    }

    @Test func badOwnWritesAreRefusedClearly() async throws {
        let live = try LiveServer(.sqlite)
        let ana = try live.token("u-1")
        let client = UUID().wireText
        for (query, field) in [
            ("own_through=3", "client_id"), ("client_id=\(client)", "own_through"), ("client_id=phone&own_through=3", "client_id"),
            ("client_id=\(client)&own_through=-1", "own_through"), ("client_id=\(client)&own_through=three", "own_through"),
        ] {
            let refused = try await live.get("/v1/pull?collections=people&\(query)", token: ana)
            #expect(refused.status == 400, "\(query): \(refused.status) \(refused.text)")
            #expect(refused.error?.code == .invalidRequest)
            #expect(refused.error?.fields?[field] != nil, "\(query): \(refused.text)")
        }
    }
}
