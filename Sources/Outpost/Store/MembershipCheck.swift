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

  /// The form stores made by earlier releases hold in their schema
  /// (`TableRebuild` makes such a table again from its current definition).
  var legacyText: String {
    "CHECK (\(column) IN (" + values.map { "'\($0)'" }.joined(separator: ", ") + "))"
  }
}
