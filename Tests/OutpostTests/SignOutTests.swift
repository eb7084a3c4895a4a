import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// Signing out never leaves the app holding a dead store: the handle stays
/// open and empty, what it held is gone from the file, and the next person
/// signs in on the same store and engine under a new client id.
@Suite("Sign-out", .timeLimit(.minutes(2)))
struct SignOutTests {
    @Test func discardEmptiesTheStoreInPlaceAndTheHandleGoesOn() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        let synced = try await device.store.create(Person(name: "Ana Secretname"))
        try await device.engine.sync()
        try await device.store.create(Person(name: "Unsent Secretname"))
        var list = await device.store.observe(Person.self).makeAsyncIterator()
        #expect(try await list.next()?.count == 2)
        let oldClient = device.store.clientID

        try await device.engine.signOut(unsentChanges: .discard)

        #expect(try await list.next()?.isEmpty == true, "an observing screen sees the store empty, not an error")
        #expect(try await device.store.query(Person.self).isEmpty)
        #expect(try await device.store.outboxSummary().total == 0)
        #expect(device.store.clientID != oldClient, "a new client: the old one's seqs are the server's history")
        #expect(await device.engine.currentStatus.signInRequired)
        let status = await device.engine.currentStatus
        #expect(status.lastSyncedAt.isEmpty, "the status forgets the last person's data: \(status)")
        for suffix in ["", "-wal"] {
            let bytes = FileManager.default.contents(atPath: device.store.path + suffix) ?? Data()
            #expect(bytes.range(of: Data("Secretname".utf8)) == nil, "no trace of a record in the database\(suffix) file")
        }

        // The person signs in again on the same handles.
        let again = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        await device.engine.updateToken(again)
        let mine = try await device.store.create(Person(name: "Bea"))
        try await device.engine.sync()
        let names = try await device.store.query(Person.self, orderBy: [.ascending(\.name)]).map(\.value.name)
        #expect(names == ["Ana Secretname", "Bea"], "what was synced comes back from the server; the discarded change does not")
        #expect(try await device.store.get(Person.self, mine)?.syncState == .synced)
        #expect(
            try harness.serverRecords().compactMap(\.data).filter { $0.contains("Bea") }.count == 1,
            "the new client's first change is stored, not answered as a repeat of the old client's seq 1")
        _ = synced
    }

    @Test func keepLeavesUnsentChangesForTheNextSignIn() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        try await device.engine.signOut(unsentChanges: .keep)
        #expect(try await device.store.outboxSummary().total == 1)
        let again = try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        await device.engine.updateToken(again)
        try await device.engine.sync()
        #expect(try harness.serverRecords().count == 1)
        #expect(try await device.store.outboxSummary().total == 0)
    }

    @Test func refuseChangesNothingWhileChangesWait() async throws {
        let harness = try SyncHarness()
        let device = try harness.device("u-1")
        try await device.store.create(Person(name: "Ana"))
        await #expect(throws: SignOutError.unsentChanges(1)) { try await device.engine.signOut(unsentChanges: .refuse) }
        #expect(await !device.engine.currentStatus.signInRequired)
        #expect(try await device.engine.sync().confirmed == 1, "still signed in, still syncing")
        try await device.engine.signOut(unsentChanges: .refuse)
        #expect(try await device.store.query(Person.self).isEmpty, "with nothing unsent, refuse wipes")
    }

    @Test func aProviderIsAskedAgainWhenTheEngineStartsAfterSignOut() async throws {
        let harness = try SyncHarness()
        let tokens = Locked<[String]>([
            try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil),
            try harness.server.tokens.issue(user: "u-2", role: .field, team: "t-1", ttl: nil),
        ])
        let asked = Locked(0)
        let device = try harness.device("u-1", credentials: { _ in
            asked.withLock { $0 += 1 }
            return tokens.withLock { $0.isEmpty ? nil : $0.removeFirst() }
        })
        try await device.store.create(Person(name: "Ana"))
        try await device.engine.sync()
        try await device.engine.signOut(unsentChanges: .discard)
        await device.engine.start()
        try await device.store.create(Person(name: "Bea"))
        try await device.engine.sync()
        #expect(asked.current == 2, "once for each person")
        let owners = try harness.server.database.read { sql in
            try sql.query("SELECT owner FROM records WHERE collection = 'people' ORDER BY version", [])
        }.map { $0.string(0) }
        #expect(owners == ["u-1", "u-2"])
        await device.engine.stop()
    }
}
