import Foundation
import OutpostSQLite
import OutpostTesting
import Testing

/// SQLite's allocation counts are off in this process: every allocation
/// took one process-wide mutex for them, which a thousand stores at work at
/// once queued on.
@Suite("SQLite counts no allocations", .timeLimit(.minutes(1)))
struct SQLiteAllocationCountsTests {
    @Test func connectionsWorkAndNothingIsCounted() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection(path: directory.path("counts.sqlite"))
        try connection.execute("CREATE TABLE t (x TEXT)")
        try connection.transaction {
            for _ in 0..<50 { try connection.run("INSERT INTO t VALUES (hex(randomblob(2000)))") }
        }
        #expect(try connection.first("SELECT count(*) FROM t") { $0.int64(0) } == 50)
        #if !canImport(SQLite3)
        // The first connection of the process (or a fault VFS registered
        // before it) said so before SQLite started.
        #expect(SQLiteConnection.allocationCountsOff)
        #expect(SQLiteConnection.memoryCounted == 0)
        #endif
    }
}
