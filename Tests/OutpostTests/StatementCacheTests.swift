import Foundation
import OutpostSQLite
import OutpostTesting
import Testing

/// A connection finds its cached statements by where their text lies
/// before hashing it: texts that come and go at the same places (short ones
/// copied to the stack, long ones built per call and freed) still get their
/// own statements, and a kept text gets the one prepared for it.
@Suite("Statements found by their text's place", .timeLimit(.minutes(1)))
struct StatementCacheTests {
    @Test func everyTextRunsItsOwnStatement() throws {
        let directory = try TemporaryDirectory()
        let connection = try SQLiteConnection(path: directory.path("statements.sqlite"))
        let padding = String(repeating: " ", count: 200)
        for round in 0..<3 {
            for value in 0..<150 {
                // Short: held inline, copied to the same stack place each time.
                #expect(try connection.first("SELECT \(value)") { $0.int64(0) } == Int64(value))
                // Long: built, run and freed, its bytes' place given to the next one.
                let long = "SELECT \(value + 1_000 * round)" + padding
                #expect(try connection.first(long) { $0.int64(0) } == Int64(value + 1_000 * round))
            }
        }
        // A literal, kept text finds its statement at once, each time.
        for _ in 0..<3 { #expect(try connection.first("SELECT 'kept'") { $0.string(0) } == "kept") }
        try connection.execute("CREATE TABLE t (x INTEGER)")
        let insert = "INSERT INTO t (x) VALUES (?)" + padding
        for value in 0..<100 { _ = try connection.run(insert, [.integer(Int64(value))]) }
        #expect(try connection.first("SELECT sum(x) FROM t") { $0.int64(0) } == 4_950)
    }
}
