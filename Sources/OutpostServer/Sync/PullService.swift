import Foundation
import OutpostCore

/// `GET /v1/pull`: the caller's scope as a change feed in commit order.
///
/// Gap-free because a page stops below the feed's watermark (see
/// `FeedWatermark`): every version below it belongs to a transaction that
/// has ended, so "everything after my cursor" never skips a write that
/// committed late. On SQLite writes are serialised and the watermark is
/// never below a committed version.
struct PullService {
    let database: any ServerDatabase
    let config: ServerConfig
    let clock: any WallClock
    /// The primary, when `database` may be a read replica: a cursor the
    /// replica has not reached is checked against the primary before it is
    /// called past the end of the feed.
    var primary: (any ServerDatabase)? = nil

    struct Request {
        var collections: [String]?
        var cursor: String?
        var limit: Int?
        var windowStart: String?
        /// The caller's own writes it already holds, left out of the page.
        var own: OwnWrites?
    }

    /// A device's store holds the answer of every change its client sent
    /// with a seq up to `through` (`client_id` and `own_through` on the
    /// request): a record whose current state one of those changes wrote
    /// (under the caller's user, at the version it still has) is left out
    /// of the page, its version still passed by the cursor. It would only
    /// bring the device what it already holds: after a push of 10,000
    /// captures, 5 MB.
    struct OwnWrites: Hashable, Sendable {
        var client: String
        var through: Int64

        /// The page's extra column: 1 for a record the caller holds.
        static let column =
            ", CASE WHEN written_user = ? AND written_client = ? AND written_seq <= ? AND written_version = version THEN 1 ELSE 0 END"

        /// A change left out weighs this fraction of a written one against
        /// the page's limit. Counted in full, the pull after a push of
        /// 10,000 captures was ten pages of 1,000 with nothing in them,
        /// each a round trip; not counted at all, a page could read the
        /// whole feed to write nothing. At a sixteenth, a page reads at
        /// most about seventeen times its limit in rows, and nothing of
        /// those it leaves out is written.
        static let weightOfWritten = 16
    }

    /// One page of the feed: the answer body (built by hand so stored record
    /// data is spliced in without being decoded and encoded again), and
    /// what the live channels need to know about it without parsing it.
    struct Page {
        var body: [UInt8]
        /// Where the changes' JSON lies in `body`, comma-separated (what
        /// goes between `[` and `]`).
        var changesRange: Range<Int>
        var cursor: String
        var hasMore: Bool
        var changes: Int
        /// The version of the last change on the page (the cursor's position).
        var lastVersion: Int64
        /// How far deletions were purged when the page was read (the cursor carries it).
        var purgedThrough: Int64 = 0
        /// Changes after the page have committed but are held back, because
        /// a transaction that may commit below them is still running: read
        /// again shortly (a live channel does; a pull waits a little first).
        var heldBack = false
        /// The body compressed where it was built (a page built ahead, on
        /// its own thread), for a request that accepts this coding.
        var encoded: (format: DeflateFormat, body: [UInt8])?

        var changesJSON: ArraySlice<UInt8> { body[changesRange] }

        /// The same page for another caller with the same scope: only the
        /// cursor (which names the caller's scope) differs.
        func reissued(cursor given: String?, scopeTag: String, serverTime: ServerTimestamp) -> Page {
            let cursor =
                changes == 0 && given != nil
                ? given! : PullCursorCodec.encode(lastVersion, purgedThrough: purgedThrough, scopeTag: scopeTag)
            var page = self
            page.cursor = cursor
            page.encoded = nil
            var body: [UInt8] = []
            body.reserveCapacity(changesRange.count + 200)
            body.append(contentsOf: Self.opening)
            body.append(contentsOf: changesJSON)
            page.changesRange = Self.opening.count..<body.count
            Self.close(&body, cursor: cursor, hasMore: hasMore, serverTime: serverTime)
            page.body = body
            return page
        }

        /// What a body holds before its first change.
        static let opening = WireKey.changes.opening + [UInt8(ascii: "[")]

        /// Ends a body that holds `opening` and the changes.
        static func close(_ out: inout [UInt8], cursor: String, hasMore: Bool, serverTime: ServerTimestamp) {
            out.append(UInt8(ascii: "]"))
            out.append(contentsOf: WireKey.cursor.member)
            JSONWriter.writeString(cursor, to: &out)
            out.append(contentsOf: WireKey.hasMore.member(hasMore))
            out.append(contentsOf: WireKey.serverTime.member)
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: serverTime.rawValue.utf8)
            out.append(contentsOf: #""}"#.utf8)
        }
    }

    func pull(_ request: Request, as principal: Principal) throws -> [UInt8] {
        try page(request, as: principal, holdWait: config.feedHoldWait).body
    }

    /// The page after the request's cursor. A page cut short by the
    /// watermark is read again until it is not or `holdWait` has passed
    /// (the transactions it waits for normally end within milliseconds; one
    /// frozen inside a transaction is ended by PostgreSQL's idle timeout,
    /// and the page returned meanwhile is correct, only shorter).
    func page(_ request: Request, as principal: Principal, holdWait: Duration) throws -> Page {
        let deadline = ContinuousClock.now + holdWait
        var pauseMicroseconds: UInt32 = 1_000
        while true {
            let page = try page(request, as: principal)
            guard page.heldBack, ContinuousClock.now + .microseconds(pauseMicroseconds) < deadline else { return page }
            usleep(pauseMicroseconds)
            pauseMicroseconds = min(pauseMicroseconds * 2, 50_000)
        }
    }

    /// What follows a removal's collection and uuid: it reads as a
    /// tombstone to a client that does not know `removed`.
    static let removalEnd = WireKey.deleted.member(true) + WireKey.removed.member(true) + [UInt8(ascii: "}")]

    /// The page after the request's cursor. A cursor past the end of the
    /// feed is 410: the device holds versions this database never had or no
    /// longer has (a power loss took the last commits, a backup was restored
    /// without `outpost feed restart`). An empty page would leave it there,
    /// silently missing every record written until versions passed it.
    func page(_ request: Request, as principal: Principal) throws -> Page {
        do {
            return try snapshotPage(request, as: principal)
        } catch is CursorPastFeedEnd {
            // A replica behind the primary has not reached a cursor the primary gave: ask the primary.
            if let primary, primary !== database {
                return try PullService(database: primary, config: config, clock: clock).page(request, as: principal)
            }
            throw APIError(
                .resyncRequired,
                "The server's data is older than this device's: it was restored or lost its last changes. The device will download its data again; unsent changes are kept.")
        }
    }

    private struct CursorPastFeedEnd: Error {}

    /// The page after the request's cursor, in one snapshot.
    private func snapshotPage(_ request: Request, as principal: Principal) throws -> Page {
        let scope = Scope(principal: principal, config: config)
        let collections = try collectionList(request.collections)
        let limit = request.limit ?? config.defaultPullLimit
        guard (1...config.maxPullLimit).contains(limit) else {
            throw APIError(
                .invalidRequest, "The limit must be between 1 and \(config.maxPullLimit).",
                fields: ["limit": "must be between 1 and \(config.maxPullLimit)"])
        }
        var windowStart: String?
        if let text = request.windowStart {
            guard let date = ServerTimestamp(rawValue: text).date else {
                throw APIError(
                    .invalidRequest, "The window start is not a valid time.",
                    fields: ["window_start": "must be an RFC 3339 time such as 2026-01-01T00:00:00Z"])
            }
            windowStart = ServerTimestamp(date).rawValue
        }
        let given = try request.cursor.map { try PullCursorCodec.decode($0, scopeTag: scope.tag) }
        let after = given?.version ?? 0

        return try database.read { sql in
            let watermark = try FeedWatermark.read(sql)
            if let given, watermark.isPastEnd(given.version) { throw CursorPastFeedEnd() }
            // Stale only if deletions past everything the cursor stands for
            // were purged since it was issued: a download that began after a
            // purge never held the records those deletions were about.
            if let given, watermark.purgedThrough > max(given.version, given.purgedThrough) {
                throw APIError(
                    .resyncRequired,
                    "This device has been away longer than the server keeps deletions. It will download its data again; unsent changes are kept.")
            }
            if sql.dialect == .postgres {
                // A branch must be read by walking an index in version order
                // and stopping at the page size. Without fresh statistics (a
                // bulk import before autovacuum's ANALYZE) PostgreSQL instead
                // collected the whole remaining scope and sorted it, for every
                // page: 160 ms a page on 235,000 records instead of 3 ms.
                try sql.execute("SET LOCAL enable_sort = off", [])
                try sql.execute("SET LOCAL enable_bitmapscan = off", [])
            }
            // Each scope branch, and the scope exits, are read in version order
            // up to one more than the page (to know whether more follows), each
            // row written as JSON as it is read; the streams are merged by
            // version here, so the database never sorts or compares whole rows
            // (a UNION did, for every page).
            var streams: [FeedStream] = []
            let own = request.own
            let ownArguments: [SQLValue] = own.map { [.text(principal.user), .text($0.client), .integer($0.through)] } ?? []
            // A page holds at most `budget` in weight: a written change
            // weighs `weight`, one left out 1 (`OwnWrites.weightOfWritten`).
            let weight = own == nil ? 1 : OwnWrites.weightOfWritten
            let budget = limit * weight
            for branch in scope.readableBranches() {
                var part = "SELECT \(ServerRecord.feedColumns)\(own == nil ? "" : OwnWrites.column) FROM records"
                    + " WHERE \(branch.condition) AND version > ?"
                part += " AND collection IN (\(collections.map { _ in "?" }.joined(separator: ", ")))"
                var trailing = collections.map { SQLValue.text($0) }
                if let windowStart {
                    part += " AND (deleted = 1 OR window_at IS NULL OR window_at >= ?)"
                    trailing.append(.text(windowStart))
                }
                part += " ORDER BY version LIMIT ?"
                trailing.append(.integer(Int64(limit + 1)))
                var stream = FeedStream(rows: limit + 1, weight: weight)
                // Read `limit + 1` rows at a time until the stream is
                // complete or weighs more than a page can take: a stream
                // not complete always holds more than the page takes from
                // it, so the merge below never runs past what was read.
                var from = after
                while true {
                    var read = 0
                    try sql.scan(part, ownArguments + branch.arguments + [.integer(from)] + trailing) { row in
                        read += 1
                        if own != nil, row.int(12) == 1 {
                            stream.passOver(version: row.int(3))
                        } else {
                            stream.append(version: row.int(3)) { ServerRecord.appendJSON(row, to: &$0) }
                        }
                    }
                    if read <= limit || stream.weight > budget { break }
                    from = stream.lastVersion
                }
                streams.append(stream)
            }
            var exitArguments: [SQLValue] = [.integer(after)]
            exitArguments += collections.map { .text($0) }
            if let condition = scope.exited(&exitArguments) {
                exitArguments.append(.integer(Int64(limit + 1)))
                var stream = FeedStream(rows: 0, weight: weight)
                try sql.scan(
                    """
                    SELECT version, collection, uuid FROM scope_exits
                    WHERE version > ? AND collection IN (\(collections.map { _ in "?" }.joined(separator: ", "))) AND \(condition)
                    ORDER BY version LIMIT ?
                    """, exitArguments
                ) { row in
                    stream.append(version: row.int(0)) { out in
                        let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
                        out.append(contentsOf: WireKey.collection.opening)
                        JSONWriter.writeString(utf8: row.text(1) ?? empty, to: &out)
                        out.append(contentsOf: WireKey.uuid.member)
                        JSONWriter.writeString(utf8: row.text(2) ?? empty, to: &out)
                        out.append(contentsOf: Self.removalEnd)
                    }
                }
                streams.append(stream)
            }

            // Nothing at or above the watermark is final yet.
            var heldBack = false
            for index in streams.indices where streams[index].cut(below: watermark.bound) { heldBack = true }

            // Merge the streams by version and cut the page. A record in two
            // branches comes once: versions are unique. When one stream holds
            // every change (most scopes, and every first download), its
            // buffer becomes the body as it stands: a 5,000-record page is
            // megabytes, and each copy of it was fresh memory to fault in.
            var body: [UInt8]
            // Entries taken (the cursor passes them), their weight, and
            // changes written (the caller's own writes are taken but not
            // written).
            var taken = 0
            var used = 0
            var written = 0
            var lastVersion = after
            let filled = streams.indices.filter { streams[$0].hasNext }
            if filled.count == 1, let only = filled.first {
                (taken, used) = streams[only].entries(within: budget)
                written = streams[only].written(amongFirst: taken)
                let end = streams[only].end(ofEntry: taken - 1)
                lastVersion = streams[only].version(ofEntry: taken - 1)
                streams[only].skip(taken)
                body = streams[only].takeBuffer(cutAt: end)
            } else {
                body = []
                body.reserveCapacity(streams.reduce(256) { $0 + $1.json.count })
                body.append(contentsOf: Page.opening)
                while true {
                    var next: Int?
                    for index in streams.indices where streams[index].hasNext {
                        if next == nil || streams[index].nextVersion < streams[next!].nextVersion { next = index }
                    }
                    guard let next, used + streams[next].nextWeight <= budget else { break }
                    used += streams[next].nextWeight
                    let version = streams[next].nextVersion
                    let change = streams[next].takeNext()
                    if !change.isEmpty {
                        if written > 0 { body.append(UInt8(ascii: ",")) }
                        body.append(contentsOf: streams[next].json[change])
                        written += 1
                    }
                    for other in streams.indices where streams[other].hasNext && streams[other].nextVersion == version {
                        _ = streams[other].takeNext()
                    }
                    lastVersion = version
                    taken += 1
                }
            }
            let changesRange = Page.opening.count..<body.count
            // A full page (no room for another written change) says more
            // follows when changes are held back, so the caller asks again
            // (and the next page waits for them).
            let full = used + weight > budget
            let hasMore = streams.contains(where: \.hasNext) || (heldBack && full)
            // An empty page returns the cursor it was given.
            let cursor = taken == 0 && request.cursor != nil
                ? request.cursor! : PullCursorCodec.encode(lastVersion, purgedThrough: watermark.purgedThrough, scopeTag: scope.tag)
            Page.close(&body, cursor: cursor, hasMore: hasMore, serverTime: ServerTimestamp(clock.now()))
            return Page(
                body: body, changesRange: changesRange, cursor: cursor, hasMore: hasMore, changes: written, lastVersion: lastVersion,
                purgedThrough: watermark.purgedThrough, heldBack: heldBack && !full)
        }
    }

    private func collectionList(_ requested: [String]?) throws -> [String] {
        guard let requested, !requested.isEmpty else { return config.collections.keys.sorted() }
        var problems: [String: String] = [:]
        for name in requested where config.collections[name] == nil {
            problems[name] = "is not a collection of this server"
        }
        guard problems.isEmpty else {
            throw APIError(
                .invalidRequest, "Unknown collection: \(problems.keys.sorted().joined(separator: ", ")).",
                fields: ["collections": "names unknown collections: \(problems.keys.sorted().joined(separator: ", "))"])
        }
        return Array(Set(requested)).sorted()
    }
}

/// Pull cursors: opaque to clients, `v2.<version>.<purged>.<scope tag>` in
/// base64url to the server. `purged` is how far deletions had been purged
/// when the cursor was issued: a later purge past both makes it stale (410),
/// an earlier one does not (see `PullService.page`). The scope tag makes a
/// cursor from another scope (a user moved to another team) answer 410
/// instead of silently missing records. `v1.<version>.<scope tag>` cursors
/// (from older servers) are read with `purged` 0.
enum PullCursorCodec {
    static func encode(_ version: Int64, purgedThrough: Int64 = 0, scopeTag: String) -> String {
        Base64URL.encode(Array("v2.\(version).\(purgedThrough).\(scopeTag)".utf8))
    }

    static func decode(_ cursor: String, scopeTag: String) throws -> (version: Int64, purgedThrough: Int64) {
        guard cursor.utf8.count <= 160, let bytes = Base64URL.decode(cursor), let text = RequestGuard.utf8Text(bytes)
        else { throw invalid }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let version: Int64
        let purged: Int64
        let tag: Substring
        switch parts.first {
        case "v1" where parts.count == 3:
            guard let value = Int64(parts[1]), value >= 0 else { throw invalid }
            (version, purged, tag) = (value, 0, parts[2])
        case "v2" where parts.count == 4:
            guard let value = Int64(parts[1]), value >= 0, let mark = Int64(parts[2]), mark >= 0 else { throw invalid }
            (version, purged, tag) = (value, mark, parts[3])
        default:
            throw invalid
        }
        guard tag == scopeTag else {
            throw APIError(
                .resyncRequired, "What this account can see has changed. The device will download its data again; unsent changes are kept.")
        }
        return (version, purged)
    }

    static let invalid = APIError(
        .invalidRequest, "The pull cursor is not one this server issued.", fields: ["cursor": "is not a valid cursor"])
}

/// One ordered source of a pull page (a scope branch, or the scope exits):
/// each change's JSON in one buffer, comma-separated after the body's
/// opening, and where each lies; when it is the page's only source, the
/// buffer is the body.
private struct FeedStream {
    private(set) var json: [UInt8] = []
    private var entries: [(version: Int64, range: Range<Int>)] = []
    private var position = 0
    /// Entries with JSON (a comma goes before each after the first).
    private var written = 0
    /// What a written entry weighs against a page's limit (one left out weighs 1).
    private let writtenWeight: Int
    /// The weight of every entry read.
    private(set) var weight = 0
    /// The room a stream that grows past its first 32 kB takes at once.
    private let fullRoom: Int

    /// `rows` is the most the stream may read. Once its buffer passes
    /// 32 kB, room for that many changes of about 500 bytes is taken at
    /// once: growing it step by step copied it each time into memory never
    /// touched before. Short pages (a live channel's, mostly empty) never
    /// take it: held by 10,000 idle streams, that room cost 60 MB.
    init(rows: Int, weight: Int) {
        writtenWeight = weight
        fullRoom = PullService.Page.opening.count + min(rows, 20_000) * 512
        json.append(contentsOf: PullService.Page.opening)
    }

    mutating func append(version: Int64, _ write: (inout [UInt8]) -> Void) {
        if written > 0 { json.append(UInt8(ascii: ",")) }
        let start = json.count
        write(&json)
        entries.append((version, start..<json.count))
        written += 1
        weight += writtenWeight
        if json.count > 32 * 1024, json.capacity < fullRoom { json.reserveCapacity(fullRoom) }
    }

    /// A change the caller holds already: its version counts, its JSON is
    /// not written (an empty range).
    mutating func passOver(version: Int64) {
        entries.append((version, json.count..<json.count))
        weight += 1
    }

    /// The version of the last entry read (0 when none was).
    var lastVersion: Int64 { entries.last?.version ?? 0 }

    private func weight(ofEntry index: Int) -> Int { entries[index].range.isEmpty ? 1 : writtenWeight }

    /// How many entries from the first fit in `budget`, and their weight.
    func entries(within budget: Int) -> (count: Int, weight: Int) {
        var count = 0
        var used = 0
        while count < entries.count, used + weight(ofEntry: count) <= budget {
            used += weight(ofEntry: count)
            count += 1
        }
        return (count, used)
    }

    var nextWeight: Int { weight(ofEntry: position) }

    /// How many of the first `count` entries have JSON.
    func written(amongFirst count: Int) -> Int {
        entries.prefix(count).reduce(0) { $0 + ($1.range.isEmpty ? 0 : 1) }
    }

    var hasNext: Bool { position < entries.count }
    var count: Int { entries.count }

    /// Drops the entries at or above `bound`; returns whether there were any.
    mutating func cut(below bound: Int64) -> Bool {
        guard let first = entries.firstIndex(where: { $0.version >= bound }) else { return false }
        entries.removeSubrange(first...)
        return true
    }
    var nextVersion: Int64 { entries[position].version }

    mutating func takeNext() -> Range<Int> {
        defer { position += 1 }
        return entries[position].range
    }

    func end(ofEntry index: Int) -> Int { entries[index].range.upperBound }
    func version(ofEntry index: Int) -> Int64 { entries[index].version }
    mutating func skip(_ count: Int) { position += count }

    /// The buffer, ending at `end`: the body's opening and the changes before it.
    mutating func takeBuffer(cutAt end: Int) -> [UInt8] {
        var buffer: [UInt8] = []
        swap(&buffer, &json)
        buffer.removeSubrange(end...)
        return buffer
    }
}
