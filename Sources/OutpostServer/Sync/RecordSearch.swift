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
/// Accents are ignored ("lucia" finds "Lucía").
struct RecordSearch {
    /// What PostgreSQL's index holds for a row, the same expression in the
    /// index and the query. Punctuation becomes spaces first, so its words
    /// are the runs of letters and digits a search is cut into: the parser
    /// alone would read a uuid's "-98b7" as the number -98 and a word b7.
    /// Accented letters and what they read as, for PostgreSQL: the same
    /// table folds the stored text and the search (its `unaccent` is an
    /// extension a managed database may not offer). SQLite's tokenizer folds
    /// accents itself.
    static let accented = "áàâäãåéèêëíìîïóòôöõøúùûüçñýÿёÁÀÂÄÃÅÉÈÊËÍÌÎÏÓÒÔÖÕØÚÙÛÜÇÑÝЁ"
    static let plain = "aaaaaaeeeeiiiioooooouuuucnyyеaaaaaaeeeeiiiioooooouuuucnyе"

    /// Accents are folded only in text that has a letter outside ASCII:
    /// `translate` over a table of multibyte letters cost 40 µs a record,
    /// two fifths of a record's write on PostgreSQL, and most records'
    /// text is plain ASCII (their keys, numbers, times, uuids). The index
    /// holds the same words as before.
    static let postgresDocument =
        "to_tsvector('simple'::regconfig, translate(CASE WHEN data ~ '[^[:ascii:]]' THEN translate(data, '\(accented)', '\(plain)') ELSE data END, '-_@./:+', '       '))"

    /// The expression of the index as it was first made (the migration that
    /// made it is kept as it ran).
    static let postgresDocumentFirst =
        "to_tsvector('simple'::regconfig, translate(data, '-_@./:+\(accented)', '       \(plain)'))"

    /// A word with its accents folded as `postgresDocument` folds them.
    static func folded(_ word: String) -> String {
        let map = Dictionary(uniqueKeysWithValues: zip(accented, plain))
        return String(word.map { map[$0] ?? $0 })
    }

    /// The search's words, lowercased; at most 8.
    let words: [String]

    /// Nil when the text holds no word (only punctuation or spaces).
    init?(_ text: String) {
        let words = text.lowercased().split { !($0.isLetter || $0.isNumber) }.prefix(8).map(String.init)
        guard !words.isEmpty else { return nil }
        self.words = words
    }

    private static func isNumber(_ word: String) -> Bool { word.allSatisfy(\.isNumber) }

    /// FTS5's query: each word quoted (they are letters and digits only, so
    /// quoting cannot break the syntax), a prefix unless it is a number.
    var sqliteQuery: String { words.map { Self.isNumber($0) ? "\"\($0)\"" : "\"\($0)\"*" }.joined(separator: " ") }

    /// PostgreSQL's `tsquery`, in the same terms.
    var postgresQuery: String {
        words.map(Self.folded).map { Self.isNumber($0) ? "'\($0)'" : "'\($0)':*" }.joined(separator: " & ")
    }

    /// How many of the newest rows PostgreSQL checks one by one before it
    /// asks the index (see `newest`).
    static let recentWindow = 1_000

    /// The newest `limit` records matching the search and `condition` (over
    /// `records`' columns, with its `arguments`), as `columns`.
    ///
    /// SQLite takes the index's matches and orders them. PostgreSQL first
    /// checks the newest rows one by one, which finds a page at once for the
    /// words people usually search (a name shared by thousands), then, when
    /// they hold fewer than a page, gathers every match from the index (few,
    /// for a rare word). Neither plan depends on the table's statistics, so
    /// a new deployment searches as fast as an analysed one.
    func newest(
        _ sql: any SQLExecutor, columns: String, where condition: String, _ arguments: [SQLValue], limit: Int
    ) throws -> [SQLRow] {
        switch sql.dialect {
        case .sqlite:
            return try sql.query(
                """
                SELECT \(columns) FROM records WHERE \(condition)
                AND records.id IN (SELECT rowid FROM records_search WHERE records_search MATCH ?)
                ORDER BY version DESC LIMIT ?
                """, arguments + [.text(sqliteQuery), .integer(Int64(limit))])
        case .postgres:
            // The newest rows by the (collection, version) or version index,
            // never a bitmap scan of the whole collection sorted afterwards:
            // without statistics the planner takes a collection for a few rows.
            try sql.execute("SET LOCAL enable_sort = off", [])
            try sql.execute("SET LOCAL enable_bitmapscan = off", [])
            let recent = try sql.query(
                """
                SELECT \(columns) FROM (
                    SELECT \(columns) FROM records WHERE \(condition) ORDER BY version DESC LIMIT \(Self.recentWindow)
                ) AS records WHERE \(Self.postgresDocument) @@ to_tsquery('simple', ?) ORDER BY version DESC LIMIT ?
                """, arguments + [.text(postgresQuery), .integer(Int64(limit))])
            try sql.execute("SET LOCAL enable_sort = on", [])
            try sql.execute("SET LOCAL enable_bitmapscan = on", [])
            if recent.count == limit { return recent }
            return try sql.query(
                """
                WITH search_hits AS MATERIALIZED (
                    SELECT id FROM records WHERE \(Self.postgresDocument) @@ to_tsquery('simple', ?))
                SELECT \(columns) FROM records WHERE \(condition) AND records.id IN (SELECT id FROM search_hits)
                ORDER BY version DESC LIMIT ?
                """, [.text(postgresQuery)] + arguments + [.integer(Int64(limit))])
        }
    }
}
