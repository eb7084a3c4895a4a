import Foundation
import OutpostServer
import OutpostTesting
import Testing

@Suite("SQLite server database", .timeLimit(.minutes(5)))
struct SQLiteServerDatabaseTests {
    @Test func writesCommitAndFailedWritesRollBack() throws {
        let directory = try TemporaryDirectory()
        let database = try SQLiteServerDatabase(path: directory.path("server.sqlite"))
        defer { database.close() }
        try database.write { sql in
            try sql.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)", [])
            try sql.execute("INSERT INTO t (k, v) VALUES (?, ?)", [.text("a"), .integer(1)])
        }
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try database.write { sql in
                try sql.execute("INSERT INTO t (k, v) VALUES (?, ?)", [.text("b"), .integer(2)])
                throw Abort()
            }
        }
        let rows = try database.read { try $0.query("SELECT k, v FROM t ORDER BY k", []) }
        #expect(rows == [SQLRow([.text("a"), .integer(1)])])
        #expect(throws: DatabaseError.self) {
            try database.write { try $0.execute("INSERT INTO t (k, v) VALUES ('a', 3)", []) }
        }
    }
}
