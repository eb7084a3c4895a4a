import Foundation

/// The device database's tables (docs/architecture.md).
///
/// Fixed tables are created by numbered migrations (`PRAGMA user_version`);
/// each registered collection gets its own table with the same control
/// columns, so one sync engine serves every collection.
enum StoreSchema {
    static let migrations: [String] = [
        """
        CREATE TABLE kv (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID;

        -- Read-only reference data: every catalog in one table.
        CREATE TABLE catalogs (
            uuid              TEXT PRIMARY KEY,
            catalog           TEXT NOT NULL,
            code              TEXT NOT NULL,
            name              TEXT NOT NULL,
            data              TEXT NOT NULL,
            server_id         INTEGER,
            server_version    INTEGER,
            server_updated_at TEXT
        );
        CREATE INDEX catalogs_by_catalog ON catalogs (catalog, code);

        -- Changes waiting for the server, in the order they were made.
        -- `seq` stays NULL until the entry is first put into a push; from then
        -- on the server may hold it, so it is never merged or cancelled.
        -- Every index here is one more page written per local write, so
        -- there are only the ones a lookup needs: no AUTOINCREMENT (a new
        -- entry always numbers after every live one), no index on mutation_id
        -- (made unique by UUIDv7, never looked up), and the seq index only
        -- holds entries that were sent.
        CREATE TABLE outbox (
            entry       INTEGER PRIMARY KEY,
            mutation_id TEXT NOT NULL,
            collection  TEXT NOT NULL,
            record_uuid TEXT NOT NULL,
            op          TEXT NOT NULL \(outboxOpCheck),
            base_version INTEGER,
            data        TEXT,
            parents     TEXT NOT NULL DEFAULT '',
            seq         INTEGER,
            attempts    INTEGER NOT NULL DEFAULT 0,
            failures    INTEGER NOT NULL DEFAULT 0,
            -- 1 when the last send got no answer: the server may hold it
            -- ("checking result"); 0 when it surely did not.
            unknown_outcome INTEGER NOT NULL DEFAULT 0,
            last_error  TEXT,
            queued_at   TEXT NOT NULL
        );
        CREATE INDEX outbox_by_record ON outbox (collection, record_uuid, entry);
        -- Partial: a new entry (no seq yet) writes nothing to it.
        CREATE UNIQUE INDEX outbox_by_seq ON outbox (seq) WHERE seq IS NOT NULL;

        -- Edits that lost to a newer server copy, kept so the app can offer
        -- to re-apply them.
        CREATE TABLE conflicts (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            collection    TEXT NOT NULL,
            record_uuid   TEXT NOT NULL,
            mutation_id   TEXT NOT NULL,
            op            TEXT NOT NULL,
            local_change  TEXT,
            server_record TEXT,
            detected_at   TEXT NOT NULL
        );

        -- Records seen during a full re-download (after 410): synced rows
        -- not seen by the end are gone from the server or the scope.
        CREATE TABLE resync_seen (
            collection TEXT NOT NULL,
            uuid       TEXT NOT NULL,
            PRIMARY KEY (collection, uuid)
        ) WITHOUT ROWID;
        """,
        // Creates whose fate on the server this database cannot know
        // (Outbox/DoubtfulCreates.swift).
        """
        CREATE TABLE doubtful_creates (
            collection          TEXT NOT NULL,
            record_uuid         TEXT NOT NULL,
            cancelled_after_seq INTEGER,
            PRIMARY KEY (collection, record_uuid)
        ) WITHOUT ROWID;
        """,
        // Attachments (Attachments/AttachmentQueue.swift): one row per blob
        // this device knows, whose bytes are a file named by the hash.
        // `upload` is NULL for a blob that came with someone else's record
        // (never this device's to send); `uploaded_bytes` is what the server
        // was last known to hold; `held` says whether the file is here;
        // `last_used` orders eviction (least recently used first).
        """
        CREATE TABLE blobs (
            sha256         TEXT PRIMARY KEY,
            size           INTEGER NOT NULL,
            content_type   TEXT NOT NULL,
            upload         TEXT \(blobUploadCheck),
            uploaded_bytes INTEGER NOT NULL DEFAULT 0,
            attempts       INTEGER NOT NULL DEFAULT 0,
            failures       INTEGER NOT NULL DEFAULT 0,
            last_error     TEXT,
            held           INTEGER NOT NULL DEFAULT 1,
            last_used      INTEGER NOT NULL DEFAULT 0,
            attached_at    TEXT
        ) WITHOUT ROWID;
        """,
        // What the queue's status counts after every settled push, found
        // without reading the whole queue (`Outbox.summary`). Both partial:
        // an ordinary local write (no parents, never sent) writes neither.
        """
        CREATE INDEX outbox_with_parents ON outbox (entry) WHERE parents != '';
        CREATE INDEX outbox_unknown_outcome ON outbox (entry) WHERE unknown_outcome != 0;
        """,
        // What every sync cycle asks first (entries whose retry budget is
        // spent), found without reading the queue; partial, so a write that
        // was never refused writes nothing to it.
        """
        CREATE INDEX outbox_failing ON outbox (entry) WHERE failures > 0;
        """,
    ]

    /// The fixed tables' membership checks (`MembershipCheck`: not `IN`,
    /// which SQLite evaluates slowly). Stores made before hold the `IN`
    /// form; `StoreMigrator` rebuilds those tables once.
    static let outboxOpCheck = MembershipCheck(column: "op", values: ["create", "update", "delete"])
    static let blobUploadCheck = MembershipCheck(column: "upload", values: ["waiting", "uploading", "uploaded", "failed"])

    /// The table of one collection. `uuid` is made on the device and is the
    /// key everywhere; `on_server` records that the server is known to hold
    /// the record (a confirmed create or a pulled copy).
    static func collectionTable(_ name: String) -> String {
        """
        CREATE TABLE IF NOT EXISTS "\(name)" (
            \(ControlColumn.definitions)
        ) WITHOUT ROWID;
        -- Only refused records are indexed (the status counts them after
        -- every sync): a local write leaves its record pending and so writes
        -- no index page. (Stores made before this had "_by_state", which
        -- took a page per write and served no query.)
        DROP INDEX IF EXISTS "\(name)_by_state";
        CREATE INDEX IF NOT EXISTS "\(name)_rejected" ON "\(name)" (sync_state) WHERE sync_state = 'rejected';
        """
    }

    static func fieldIndexName(collection: String, field: String) -> String { "\(collection)_by_\(field)" }

    static func fieldIndex(collection: String, field: String) -> String {
        """
        CREATE INDEX IF NOT EXISTS "\(collection)_by_\(field)" ON "\(collection)" (json_extract(data, '$.\(field)'));
        """
    }

    static func dropFieldIndex(collection: String, field: String) -> String {
        "DROP INDEX IF EXISTS \"\(collection)_by_\(field)\";"
    }

    /// Names the store uses itself; a collection may not take them.
    static let reservedNames: Set<String> = [
        "kv", "catalogs", "outbox", "conflicts", "resync_seen", "doubtful_creates", "blobs",
    ]
}
