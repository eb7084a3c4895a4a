import Foundation

/// The server's tables, for both dialects, applied by numbered migrations.
///
/// - `records`: every record's latest state (tombstones included) with the
///   `version` that orders the change feed.
/// - `scope_exits`: a record leaving someone's scope (reassigned), at its
///   own feed version, so their next pull says `removed`.
/// - `client_seqs` / `mutation_results`: the dedupe state of rule 1 in docs/protocol.md,
///   per (user, client id); results' ids as bytes on SQLite (`ResultIDs`).
/// - `tokens`: hashes of bearer tokens, never the tokens themselves.
/// - `blobs`, `blob_chunks`, `blob_owners`, `blob_refs`: attachments' state,
///   their bytes on PostgreSQL (files beside a SQLite database), who uploaded
///   them, and which live records name them.
/// - `record_history`, `push_problems`, `admin_sessions`, `records_search`:
///   what the administrator's console shows and searches.
/// - `own_table_pending`, `own_tables`: rows of the app's own tables
///   waiting for a feed version, and each attached table's backfill.
/// - `server_state`: the version counter (SQLite), the base of versions
///   made from transaction ids (PostgreSQL) and the tombstone horizon.
/// - `schema_steps` / `schema_migrations`: the steps taken, and those up to
///   the newest contract step (see `migrate`).
package enum ServerSchema {
    static func migrations(_ dialect: SQLDialect) -> [String] {
        let bigint = dialect == .postgres ? "BIGINT" : "INTEGER"
        let serial = dialect == .postgres ? "BIGSERIAL PRIMARY KEY" : "INTEGER PRIMARY KEY AUTOINCREMENT"
        return [
            """
            CREATE TABLE server_state (
                key   TEXT PRIMARY KEY,
                value TEXT NOT NULL
            );
            INSERT INTO server_state (key, value) VALUES ('version', '0'), ('purged_through', '0');

            CREATE TABLE records (
                id                \(serial),
                collection        TEXT NOT NULL,
                uuid              TEXT NOT NULL,
                version           \(bigint) NOT NULL,
                updated_at        TEXT NOT NULL,
                deleted           INTEGER NOT NULL DEFAULT 0,
                owner             TEXT NOT NULL,
                team              TEXT NOT NULL,
                created_by_user   TEXT NOT NULL,
                created_by_client TEXT NOT NULL,
                window_at         TEXT,
                data              TEXT,
                UNIQUE (collection, uuid)
            );
            CREATE UNIQUE INDEX records_by_version ON records (version);
            CREATE INDEX records_by_owner ON records (owner, version);
            CREATE INDEX records_by_team ON records (team, version);
            CREATE INDEX records_by_collection ON records (collection, version);

            CREATE TABLE scope_exits (
                version    \(bigint) PRIMARY KEY,
                collection TEXT NOT NULL,
                uuid       TEXT NOT NULL,
                old_owner  TEXT NOT NULL,
                old_team   TEXT NOT NULL,
                at         TEXT NOT NULL
            );

            CREATE TABLE client_seqs (
                user_id    TEXT NOT NULL,
                client_id  TEXT NOT NULL,
                last_seq   \(bigint) NOT NULL,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (user_id, client_id)
            );

            CREATE TABLE mutation_results (
                user_id     TEXT NOT NULL,
                client_id   TEXT NOT NULL,
                seq         \(bigint) NOT NULL,
                mutation_id TEXT NOT NULL,
                result      TEXT NOT NULL,
                created_at  TEXT NOT NULL,
                PRIMARY KEY (user_id, client_id, seq)
            );
            CREATE INDEX mutation_results_by_id ON mutation_results (user_id, mutation_id);
            CREATE INDEX mutation_results_by_age ON mutation_results (created_at);

            CREATE TABLE tokens (
                hash       TEXT PRIMARY KEY,
                user_id    TEXT NOT NULL,
                role       TEXT NOT NULL,
                team       TEXT NOT NULL,
                created_at TEXT NOT NULL,
                expires_at TEXT,
                revoked_at TEXT
            );
            """,
            // The device clock's time of each record's last write (display
            // only), and which app version and schema each client last sent.
            """
            ALTER TABLE records ADD COLUMN device_time TEXT;

            CREATE TABLE client_versions (
                user_id    TEXT NOT NULL,
                client_id  TEXT NOT NULL,
                schema_version INTEGER,
                app        TEXT,
                seen_at    TEXT NOT NULL,
                PRIMARY KEY (user_id, client_id)
            );
            """,
            // Live streams look for tokens revoked in the last seconds, once
            // a second per server: an index over revoked ones only, so that
            // read never scans every token ever issued.
            """
            CREATE INDEX tokens_by_revocation ON tokens (revoked_at) WHERE revoked_at IS NOT NULL;
            """,
            // PostgreSQL derives feed versions from transaction ids above this
            // base (see FeedVersions): every version written before, by the
            // counter, stays below every version written after.
            """
            INSERT INTO server_state (key, value) SELECT 'feed_base', value FROM server_state WHERE key = 'version';
            """,
            // Attachments: what the server holds of each blob (named by its
            // SHA-256); the bytes are files beside a SQLite database, and
            // rows of `blob_chunks` on PostgreSQL, so servers share them.
            """
            CREATE TABLE blobs (
                sha256       TEXT PRIMARY KEY,
                size         \(bigint) NOT NULL,
                received     \(bigint) NOT NULL,
                complete     INTEGER NOT NULL DEFAULT 0,
                content_type TEXT,
                uploader     TEXT NOT NULL,
                created_at   TEXT NOT NULL,
                touched_at   TEXT,
                completed_at TEXT
            );
            CREATE TABLE blob_chunks (
                sha256 TEXT NOT NULL,
                offset_bytes \(bigint) NOT NULL,
                data   \(dialect == .postgres ? "BYTEA" : "BLOB") NOT NULL,
                PRIMARY KEY (sha256, offset_bytes)
            );
            CREATE TABLE blob_owners (
                sha256  TEXT NOT NULL,
                user_id TEXT NOT NULL,
                PRIMARY KEY (sha256, user_id)
            );
            CREATE TABLE blob_refs (
                sha256     TEXT NOT NULL,
                collection TEXT NOT NULL,
                uuid       TEXT NOT NULL,
                PRIMARY KEY (sha256, collection, uuid)
            );
            CREATE INDEX blob_refs_by_record ON blob_refs (collection, uuid);
            """,
            // The administrator's console: every version of every record (who
            // wrote it, from which device, on which clocks), every change the
            // server refused or that met a conflict, and console sessions
            // (kept in the database so every server behind a balancer
            // honours one).
            """
            CREATE TABLE record_history (
                id          \(serial),
                collection  TEXT NOT NULL,
                uuid        TEXT NOT NULL,
                version     \(bigint) NOT NULL,
                op          TEXT NOT NULL,
                at          TEXT NOT NULL,
                user_id     TEXT NOT NULL,
                client_id   TEXT NOT NULL,
                device_time TEXT,
                owner       TEXT NOT NULL,
                team        TEXT NOT NULL,
                data        TEXT
            );
            CREATE INDEX record_history_by_record ON record_history (collection, uuid, version);

            CREATE TABLE push_problems (
                id             \(serial),
                kind           TEXT NOT NULL,
                at             TEXT NOT NULL,
                user_id        TEXT NOT NULL,
                client_id      TEXT NOT NULL,
                mutation_id    TEXT NOT NULL,
                seq            \(bigint) NOT NULL,
                collection     TEXT NOT NULL,
                uuid           TEXT NOT NULL,
                op             TEXT NOT NULL,
                code           TEXT,
                errors         TEXT,
                sent           TEXT,
                base_version   \(bigint),
                server_version \(bigint),
                server_data    TEXT,
                lost           TEXT NOT NULL
            );
            CREATE INDEX push_problems_by_client ON push_problems (user_id, client_id, id);
            CREATE INDEX push_problems_by_age ON push_problems (at);

            CREATE TABLE admin_sessions (
                hash         TEXT PRIMARY KEY,
                user_id      TEXT NOT NULL,
                csrf         TEXT NOT NULL,
                token_hash   TEXT,
                created_at   TEXT NOT NULL,
                expires_at   TEXT NOT NULL,
                last_seen_at TEXT NOT NULL
            );
            """,
            // Text search over records' values. SQLite: an FTS5 index over
            // `records.data` (its content read from `records`, so no second
            // copy), kept by triggers; it holds which records have each word
            // and nothing more (no positions, no sizes: searches match words,
            // never phrases, and are not ranked), a fraction of the writes. PostgreSQL: a GIN index over the words
            // of the stored JSON text, with no extension to install.
            dialect == .postgres
                ? """
                CREATE INDEX records_search ON records USING gin (\(RecordSearch.postgresDocumentFirst));
                """
                : """
                CREATE VIRTUAL TABLE records_search USING fts5(
                    data, content = 'records', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2',
                    detail = none, columnsize = 0);
                CREATE TRIGGER records_search_insert AFTER INSERT ON records BEGIN
                    INSERT INTO records_search (rowid, data) VALUES (new.id, new.data);
                END;
                CREATE TRIGGER records_search_delete AFTER DELETE ON records BEGIN
                    INSERT INTO records_search (records_search, rowid, data) VALUES ('delete', old.id, old.data);
                END;
                CREATE TRIGGER records_search_update AFTER UPDATE OF data ON records BEGIN
                    INSERT INTO records_search (records_search, rowid, data) VALUES ('delete', old.id, old.data);
                    INSERT INTO records_search (rowid, data) VALUES (new.id, new.data);
                END;
                INSERT INTO records_search (records_search) VALUES ('rebuild');
                """,
            // A push finds earlier results of its mutation ids by id alone
            // (the caller's user and client are checked on the rows found): on
            // a new PostgreSQL with no statistics yet, a lookup that also named
            // the user and client walked the primary key through every result
            // of that client, filtering by id, and each push of a long queue
            // took longer than the one before.
            """
            DROP INDEX mutation_results_by_id;
            CREATE INDEX mutation_results_by_mutation ON mutation_results (mutation_id);
            """,
            // A first download waits for its scope's count before asking for
            // a page. The count read each record's row for its collection and
            // deleted flag (235,613 rows: 60-100 ms); with both in the scope
            // indexes it reads the index alone. The rows' versions change on
            // every write, so these index entries were rewritten by every
            // write already. Housekeeping's look for tombstones past the
            // horizon walked every record under the write lock; tombstones
            // now have an index of their own, which live records never enter.
            """
            DROP INDEX records_by_owner;
            CREATE INDEX records_by_owner ON records (owner, version, collection, deleted);
            DROP INDEX records_by_team;
            CREATE INDEX records_by_team ON records (team, version, collection, deleted);
            DROP INDEX records_by_collection;
            CREATE INDEX records_by_collection ON records (collection, version, deleted);
            CREATE INDEX records_tombstones ON records (updated_at) WHERE deleted = 1;
            """,
            // SQLite's search index is written by the statements that write
            // records' data (`SearchIndex`), no longer by triggers on insert
            // and update: a trigger gave each record's write a savepoint, and
            // FTS5 wrote a new index segment at every one. The index's
            // content is unchanged; the trigger on delete stays.
            dialect == .postgres
                ? ""
                : """
                DROP TRIGGER records_search_insert;
                DROP TRIGGER records_search_update;
                """,
            // Which push wrote each record's current state: the user, the
            // client, the mutation's seq and the version that write gave it.
            // A pull whose caller holds the answers of its own changes
            // through a seq leaves those records out (`PullService.OwnWrites`).
            // Any other write gives the record a new version, so a mark left
            // by an earlier push never matches it.
            """
            ALTER TABLE records ADD COLUMN written_user TEXT;
            ALTER TABLE records ADD COLUMN written_client TEXT;
            ALTER TABLE records ADD COLUMN written_seq \(bigint);
            ALTER TABLE records ADD COLUMN written_version \(bigint);
            """,
            // Collections on the app's own tables (PostgreSQL): rows written by
            // anyone but Outpost wait in `own_table_pending` for their feed
            // version (`OwnTableSequencer`); `own_tables` is what was attached
            // and how far its existing rows were given versions.
            """
            CREATE TABLE own_table_pending (
                collection TEXT NOT NULL,
                uuid       TEXT NOT NULL,
                queued     \(dialect == .postgres ? "BIGSERIAL" : "INTEGER NOT NULL DEFAULT 0"),
                PRIMARY KEY (collection, uuid)
            );
            CREATE INDEX own_table_pending_by_queue ON own_table_pending (queued);
            CREATE TABLE own_tables (
                collection         TEXT PRIMARY KEY,
                table_name         TEXT NOT NULL,
                backfilled_through TEXT,
                backfill_done      INTEGER NOT NULL DEFAULT 0
            );
            """,
            // PostgreSQL's search index folds accents only in text that has
            // a letter outside ASCII (`RecordSearch.postgresDocument`): the
            // same words, a third of the cost of a record's write.
            dialect == .postgres
                ? """
                DROP INDEX records_search;
                CREATE INDEX records_search ON records USING gin (\(RecordSearch.postgresDocument));
                """
                : "",
            // Expand: the version of the record a push result names, so a
            // result can be kept without a copy of the record (see the next
            // step). Older servers neither read nor write the column.
            """
            ALTER TABLE mutation_results ADD COLUMN record_version \(bigint);
            """,
            // Contract: results keep the outcome and the record's version, not
            // the record; a duplicate's record is read back from `records` or
            // `record_history` at that version (`StoredOutcome`). Results whose
            // version no history row holds keep their copy. Older servers
            // read the copy, so this waits until none runs (docs/operations.md).
            // The age index goes too (a seventh of the table's bytes):
            // results are written in time order, so housekeeping finds the
            // old ones by rowid on SQLite (`ResultsByAge`) and by a block
            // range index on PostgreSQL.
            dialect == .postgres
                ? """
                UPDATE mutation_results SET
                    record_version = CAST(result::jsonb #>> '{record,version}' AS BIGINT),
                    result = (result::jsonb - 'record' - 'seq' - 'id')::text
                WHERE result LIKE '{%' AND result NOT LIKE '%\\\\u0000%' AND EXISTS (
                    SELECT 1 FROM record_history h
                    WHERE h.collection = mutation_results.result::jsonb #>> '{record,collection}'
                    AND h.uuid = mutation_results.result::jsonb #>> '{record,uuid}'
                    AND h.version = CAST(mutation_results.result::jsonb #>> '{record,version}' AS BIGINT));
                DROP INDEX mutation_results_by_age;
                CREATE INDEX mutation_results_by_age ON mutation_results USING brin (created_at);
                """
                : """
                UPDATE mutation_results SET
                    record_version = json_extract(result, '$.record.version'),
                    result = json_remove(result, '$.record', '$.seq', '$.id')
                WHERE result LIKE '{%' AND json_valid(result) AND EXISTS (
                    SELECT 1 FROM record_history h
                    WHERE h.collection = json_extract(mutation_results.result, '$.record.collection')
                    AND h.uuid = json_extract(mutation_results.result, '$.record.uuid')
                    AND h.version = json_extract(mutation_results.result, '$.record.version'));
                DROP INDEX mutation_results_by_age;
                """,
            // Contract: on SQLite a result's client id and mutation id are
            // kept as their 16 bytes, not as 36 characters of text (in the
            // row, the primary key and the id index they were most of the
            // table). The rows move to a table declared so, each id that is
            // a UUID converted (`ResultIDs`), under their own rowids.
            // Older servers bind ids as text and would find none of them.
            // PostgreSQL keeps text: nothing to do there.
            dialect == .postgres
                ? ""
                : """
                DROP INDEX mutation_results_by_mutation;
                ALTER TABLE mutation_results RENAME TO mutation_results_text;
                CREATE TABLE mutation_results (
                    user_id        TEXT NOT NULL,
                    client_id      BLOB NOT NULL,
                    seq            INTEGER NOT NULL,
                    mutation_id    BLOB NOT NULL,
                    result         TEXT NOT NULL,
                    created_at     TEXT NOT NULL,
                    record_version INTEGER,
                    PRIMARY KEY (user_id, client_id, seq)
                );
                CREATE INDEX mutation_results_by_mutation ON mutation_results (mutation_id);
                """,
        ]
    }

    /// What a step does that SQL cannot say, run after its statements:
    /// SQLite before 3.41 has no `unhex`, so the ids' bytes are made here.
    static func finish(step: Int, _ sql: any SQLExecutor) throws {
        if step == compactResultIDsStep && sql.dialect == .sqlite { try ResultIDs.convertStoredResults(in: sql) }
    }

    /// The steps that contract: once one ran, a server that does not know
    /// it no longer works on the database. Every other step from
    /// `firstExpandStep` on is expand-only: a server one release older
    /// keeps serving beside the newer one (docs/operations.md, "Upgrading").
    static let contractingSteps: Set<Int> = [15, 16]
    /// Steps before this one predate the distinction: each counts as contracting.
    static let firstExpandStep = 14
    /// Contract steps up to this one run when a server starts; later ones
    /// only when asked (`outpost migrate --contract`). The release after
    /// the one that adds a contract step raises this past it.
    static let contractedAtStartThrough = 13

    /// A migration's statements. Split at `;`, except inside a trigger's
    /// `BEGIN … END` (whose body has statements of its own).
    static func statements(_ migration: String) -> [String] {
        var statements: [String] = []
        var current = ""
        for piece in migration.split(separator: ";", omittingEmptySubsequences: false) {
            current += current.isEmpty ? String(piece) : ";" + piece
            let trimmed = current.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.uppercased().hasPrefix("CREATE TRIGGER") && !trimmed.uppercased().hasSuffix("END") { continue }
            if !trimmed.isEmpty { statements.append(trimmed) }
            current = ""
        }
        return statements
    }

    /// Brings the database to the current schema, stopping before a
    /// pending contract step unless `contract` (or the step is at most
    /// `contractedAtStartThrough`). A new database takes every step: no
    /// older server has run on it. Runs inside a write transaction, so two
    /// servers starting at once migrate once.
    ///
    /// `schema_steps` lists every step taken; `schema_migrations` only
    /// those up to the newest contract step taken (`SchemaState.oldestServer`):
    /// servers of releases before this bookkeeping compare its highest
    /// number with their own count, so an expand step leaves them serving.
    package static func migrate(_ database: any ServerDatabase, contract: Bool = false) throws {
        try database.write { sql in
            // Writers of PostgreSQL take no common lock; migrations do, so
            // servers starting together apply each one once.
            if sql.dialect == .postgres { _ = try sql.query(PostgresDatabase.writeLockStatement, []) }
            try sql.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)", [])
            try sql.execute("CREATE TABLE IF NOT EXISTS schema_steps (version INTEGER PRIMARY KEY)", [])
            // A database an older release migrated: its steps are the ones it recorded.
            try sql.execute(
                "INSERT INTO schema_steps (version) SELECT version FROM schema_migrations WHERE version > (SELECT COALESCE(MAX(version), 0) FROM schema_steps)",
                [])
            let state = try SchemaState.read(sql)
            var oldestServer = state.oldestServer
            for (index, migration) in migrations(database.dialect).enumerated() where index + 1 > state.applied {
                let step = index + 1
                if contracts(step) && state.applied > 0 && !contract && step > contractedAtStartThrough { break }
                for statement in statements(migration) { try sql.execute(statement, []) }
                try finish(step: step, sql)
                try sql.execute("INSERT INTO schema_steps (version) VALUES (?)", [.integer(Int64(step))])
                if contracts(step) { oldestServer = step }
            }
            for version in stride(from: state.oldestServer + 1, through: oldestServer, by: 1) {
                try sql.execute("INSERT INTO schema_migrations (version) VALUES (?)", [.integer(Int64(version))])
            }
        }
    }

    /// Whether `step` (numbered from 1) leaves servers that do not know it unable to work.
    static func contracts(_ step: Int) -> Bool {
        step < firstExpandStep || contractingSteps.contains(step)
    }

    /// The steps this release needs taken to serve: every one up to its
    /// first contract step still to be asked for (its code works before and
    /// after that step).
    package static func required(_ dialect: SQLDialect) -> Int {
        let known = current(dialect)
        let waiting = (contractedAtStartThrough + 1...max(contractedAtStartThrough + 1, known)).first { $0 <= known && contracts($0) }
        return waiting.map { $0 - 1 } ?? known
    }

    /// This release's schema: the number of steps it knows.
    package static func current(_ dialect: SQLDialect) -> Int { migrations(dialect).count }

    /// Push results are kept without a copy of their record once the step
    /// that slims them has run (no older server reads them any more).
    static let slimResultsStep = 15

    /// Push results' client and mutation ids are kept as their bytes on
    /// SQLite once this step has run (`ResultIDs`).
    static let compactResultIDsStep = 16
}

/// Where a database stands: the steps taken, and the oldest release's
/// schema that may still serve on it.
package struct SchemaState: Equatable, Sendable {
    /// The highest step taken.
    package var applied: Int
    /// The newest contract step taken: a server knowing fewer steps must not serve.
    package var oldestServer: Int

    /// The state of `database`.
    package static func read(_ database: any ServerDatabase) throws -> SchemaState {
        try database.read { try read($0) }
    }

    /// The oldest release's schema that may serve: one read of the mark (each push asks).
    static func oldestServer(_ sql: any SQLExecutor) throws -> Int {
        Int(try sql.first("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")?.int(0) ?? 0)
    }

    static func read(_ sql: any SQLExecutor) throws -> SchemaState {
        // A database only a release before `schema_steps` migrated: its steps are the marked ones.
        let exists =
            sql.dialect == .postgres
            ? "SELECT to_regclass('schema_steps') IS NOT NULL"
            : "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_steps')"
        let steps = try sql.first(exists)?.bool(0) == true ? "schema_steps" : "schema_migrations"
        let row = try sql.first(
            """
            SELECT (SELECT COALESCE(MAX(version), 0) FROM \(steps)), (SELECT COALESCE(MAX(version), 0) FROM schema_migrations)
            """)
        return SchemaState(applied: Int(row?.int(0) ?? 0), oldestServer: Int(row?.int(1) ?? 0))
    }

    /// Why a server knowing `known` steps, of which it needs `required`
    /// taken, may not serve here, or nil when it may.
    package func refusal(known: Int, required: Int) -> String? {
        if applied < required {
            return "The database's schema is at step \(applied), this server needs \(required): it has not been migrated yet (outpost serve migrates it when it starts)."
        }
        if oldestServer > known {
            return "The database's schema is at step \(applied) and no longer serves servers before step \(oldestServer) "
                + "(a newer release contracted it); this server knows \(known): run the newer release here too."
        }
        return nil
    }

    /// The steps that wait for `outpost migrate --contract`.
    package func pendingContract(_ dialect: SQLDialect) -> [Int] {
        (0..<ServerSchema.current(dialect)).map { $0 + 1 }.filter { $0 > oldestServer && ServerSchema.contracts($0) }
    }
}
