import Foundation

/// Text search over records' values through the database's own index:
/// SQLite's FTS5 (`records_search`) or PostgreSQL's full-text GIN index over
/// the stored JSON text (as text: a value holding `\u0000` cannot become a
/// PostgreSQL JSON string, and a failing index would refuse the write). A search of 235,613 people answers in milliseconds
/// instead of reading every row.
///
/// The text is cut into words; a record matches when each word of the
/// search begins a word of its values ("rom" finds "Romero"), except that a
/// number must be a whole word ("2" finds "Old 2", not every date of 2026).
/// SQLite also ignores accents ("lucia" finds "Lucía"); PostgreSQL compares
/// them as written.
struct RecordSearch {
    /// What PostgreSQL's index holds for a row, the same expression in the
    /// index and the query. Punctuation becomes spaces first, so its words
    /// are the runs of letters and digits a search is cut into: the parser
    /// alone would read a uuid's "-98b7" as the number -98 and a word b7.
    static let postgresDocument = "to_tsvector('simple'::regconfig, translate(data, '-_@./:+', '       '))"

    /// The search's words, lowercased; at most 8.
    let words: [String]

    /// Nil when the text holds no word (only punctuation or spaces).
    init?(_ text: String) {
        let words = text.lowercased().split { !($0.isLetter || $0.isNumber) }.prefix(8).map(String.init)
        guard !words.isEmpty else { return nil }
        self.words = words
    }

    private static func isNumber(_ word: String) -> Bool { word.allSatisfy(\.isNumber) }

    /// A condition on `records.id` selecting the matching rows, appending its argument.
    /// PostgreSQL's hits are gathered first (a materialized CTE named
    /// `search_hits`, which `withClause` declares), so the plan never walks
    /// the whole table checking each row, whatever the statistics say.
    func condition(_ dialect: SQLDialect, _ arguments: inout [SQLValue]) -> String {
        switch dialect {
        case .sqlite:
            // Words are letters and digits only: quoting them cannot break the query's syntax.
            arguments.append(.text(words.map { Self.isNumber($0) ? "\"\($0)\"" : "\"\($0)\"*" }.joined(separator: " ")))
            return "records.id IN (SELECT rowid FROM records_search WHERE records_search MATCH ?)"
        case .postgres:
            return "records.id IN (SELECT id FROM search_hits)"
        }
    }

    /// The `WITH` clause PostgreSQL's condition needs (empty on SQLite), with its argument.
    func withClause(_ dialect: SQLDialect, _ arguments: inout [SQLValue]) -> String {
        guard dialect == .postgres else { return "" }
        arguments.append(.text(words.map { Self.isNumber($0) ? "'\($0)'" : "'\($0)':*" }.joined(separator: " & ")))
        return """
            WITH search_hits AS MATERIALIZED (
                SELECT id FROM records WHERE \(Self.postgresDocument) @@ to_tsquery('simple', ?))
            """
    }
}
