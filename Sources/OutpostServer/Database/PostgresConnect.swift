import CLibPQ
import Foundation

/// Opens a libpq connection to `url` (a URL or a `key=value` string) with
/// GSSAPI encryption off unless the URL asks for it. libpq otherwise looks
/// for a Kerberos ticket on every connect (`gssencmode=prefer`): that loads
/// and starts the Kerberos library, whose exit handlers then raced the
/// threads still closing connections in short-lived `outpost` commands
/// (`k5_mutex_lock: Received error 22`, an abort at exit). Outpost's
/// PostgreSQL connections are TCP or Unix sockets with TLS if the URL says
/// so; a deployment on Kerberos names `gssencmode` in its URL, which wins.
///
/// Every connection names itself (`application_name`, unless the URL or
/// `PGAPPNAME` gives one): `pg_stat_activity` then tells Outpost's sessions,
/// and what each is doing (`outpost` for requests, `outpost listen` for the
/// connection that hears other servers' commits), from the app's own.
enum PostgresConnect {
    static func open(_ url: String, name: String = "outpost") -> OpaquePointer? {
        // Key words are read in order and the last value of each wins: the
        // URL, expanded from `dbname`, overrides the defaults before it.
        let keywords = ["gssencmode", "fallback_application_name", "dbname"]
        let values = ["disable", name, url]
        return withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
    }

    /// `strings` as a NULL-terminated array of C strings, for the call.
    private static func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let pointers = copies.map { UnsafePointer<CChar>($0) } + [nil]
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
