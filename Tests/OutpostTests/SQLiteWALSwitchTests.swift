import Foundation
import OutpostCore
import OutpostSQLite
import OutpostTesting
import Testing

/// Connections that open one new database file at the same moment each
/// switch it to WAL. SQLite does not wait for the busy timeout there: two
/// connections both reading the empty file and both asking for it
/// exclusively would wait on each other forever, so one is told "database
/// is locked" at once (an app and its extension creating their store
/// together, under load). Opening tries the switch again within the
/// timeout.
@Suite("Switching a new file to WAL at once", .timeLimit(.minutes(2)))
struct SQLiteWALSwitchTests {
    @Test func connectionsOpeningOneNewFileAtOnceAllOpenIt() throws {
        let connections = 6
        var refused: [String] = []
        for round in 0..<60 {
            let directory = try TemporaryDirectory()
            let path = directory.path("store-\(round).sqlite")
            let start = DispatchSemaphore(value: 0)
            let done = DispatchGroup()
            let failures = Locked<[String]>([])
            for _ in 0..<connections {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    start.wait()
                    do {
                        let connection = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 10_000)
                        connection.close()
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
            for _ in 0..<connections { start.signal() }
            #expect(done.wait(timeout: .now() + 60) == .success, "round \(round): the connections opened within a minute")
            refused += failures.current
        }
        #expect(refused.isEmpty, "\(refused.count) connections refused: \(refused.first ?? "")")
    }
}
