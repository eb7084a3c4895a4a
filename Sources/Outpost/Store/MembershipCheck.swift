import Foundation
import OutpostSQLite

/// A `CHECK` that a column holds one of a few fixed texts (a sync state, an
/// outbox operation), written as `=` tests joined by `OR`.
///
/// Not `column IN ('a', 'b', 'c')`: for a list of more than two values,
/// SQLite builds a temporary index of the list every time the check runs,
/// that is, on every insert and on every update that sets the column. On
/// this kind of machine that was 6 µs of the 9 µs a record's insert took, and
/// as much again for its outbox entry. The `OR` form accepts and refuses
/// exactly the same values (NULL included: both yield NULL, which a check
/// lets through) at no measurable cost.
struct MembershipCheck: CustomStringConvertible {
  let column: String
  let values: [String]

  /// `CHECK (op = 'create' OR op = 'update' OR op = 'delete')`.
  var description: String {
    "CHECK (" + values.map { "\(column) = '\($0)'" }.joined(separator: " OR ") + ")"
  }

  /// The form stores made before this one hold in their schema.
  var legacyText: String {
    "CHECK (\(column) IN (" + values.map { "'\($0)'" }.joined(separator: ", ") + "))"
  }

  /// Rebuilds `table` when its definition still holds the legacy form of
  /// one of `checks`: the same definition with each legacy check replaced,
  /// every row copied, the table's indexes made again.
  /// SQLite cannot alter a constraint in place; this is its documented
  /// way of changing a table's definition. Runs inside the caller's
  /// transaction, so a failure leaves the old table as it was.
  static func upgrade(_ table: String, checks: [MembershipCheck], in connection: SQLiteConnection)
    throws
  {
    guard
      let definition = try connection.first(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", [.text(table)],
        { $0.string(0) })
    else { return }
    var upgraded = definition
    for check in checks {
      upgraded = upgraded.replacingOccurrences(of: check.legacyText, with: check.description)
    }
    guard upgraded != definition else { return }
    let indexes = try connection.query(
      "SELECT sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
      [.text(table)]
    ) { $0.string(0) }
    let scratch = "\(table)__upgrade"
    // The stored text starts `CREATE TABLE <name>` with the name as it
    // was written (quoted or not): only that first name is replaced.
    guard let open = upgraded.firstIndex(of: "(") else { return }
    let body = upgraded[open...]
    let columns = try connection.query("PRAGMA table_info(\"\(table)\")") { "\"\($0.string(1))\"" }
      .joined(separator: ", ")
    try connection.execute("DROP TABLE IF EXISTS \"\(scratch)\"")
    try connection.execute("CREATE TABLE \"\(scratch)\" " + body)
    // Every table upgraded here is keyed by its own columns (the outbox's
    // `entry` is its rowid), so copying the columns keeps every key.
    try connection.execute(
      "INSERT INTO \"\(scratch)\" (\(columns)) SELECT \(columns) FROM \"\(table)\"")
    try connection.execute("DROP TABLE \"\(table)\"")
    try connection.execute("ALTER TABLE \"\(scratch)\" RENAME TO \"\(table)\"")
    for index in indexes { try connection.execute(index) }
  }
}
