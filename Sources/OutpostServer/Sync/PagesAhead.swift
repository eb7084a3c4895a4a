import Foundation

/// The next page of a download, built while the page before it travels.
///
/// A device downloading its scope asks for one page at a time, each with
/// the cursor of the answer before it, so the server sat idle while a page
/// crossed the network and was read, and the device waited while the next
/// one was built (9-15 ms for 5,000 records). When a full page goes out,
/// the page after it is built at once, on another thread, and kept for a
/// moment for the request that will ask for it. It is compressed there in
/// the coding the download accepts (`Page.encoded`), so that request only
/// sends bytes; and once it is read, the page after it is built too (see
/// `SyncServer.pullPage`).
///
/// A page built ahead is what a pull made at that moment would have
/// answered. It is only ever served to the same scope, for the same
/// collections, limit, window and cursor, once, and never after a commit
/// this server heard of (its own or another server's): every kept page is
/// dropped then. A write made meanwhile would come in a later page anyway
/// (its version is above every version the page covers), but a device that
/// pushed and then pulls must find its write in that pull, and a page read
/// from a lagging replica must not be older than a commit already heard.
final class PagesAhead: @unchecked Sendable {
    // @unchecked Sendable: `entries` and `building` are only touched while `lock` is held.

    /// What makes two requests ask for the same page.
    struct Key: Hashable {
        var scope: String
        var collections: [String]?
        var limit: Int?
        var windowStart: String?
        /// A page that leaves out the caller's own writes is never another request's.
        var own: PullService.OwnWrites?
        var cursor: String?
    }

    // @unchecked Sendable: `page` is written before `done` is signalled and
    // read only after waiting for it.
    private final class Entry: @unchecked Sendable {
        let made = ContinuousClock.now
        let done = DispatchSemaphore(value: 0)
        var page: PullService.Page?
    }

    private let lock = NSLock()
    private var entries: [Key: Entry] = [:]
    private var building = 0
    /// Pages being built ahead at once, across all downloads (each holds a
    /// database reader while it builds).
    private let concurrentBuilds: Int
    /// Pages kept or being built at once: each holds up to a page of the
    /// largest size a pull may ask for, so many downloads at once do not
    /// pile them up in memory (past this, pages are built when asked for).
    private let maxKept: Int
    /// A page not asked for within this long is dropped.
    private let keep: Duration
    private let queue = DispatchQueue(label: "outpost.pages-ahead", qos: .userInitiated, attributes: .concurrent)

    init(concurrentBuilds: Int = 2, maxKept: Int = 32, keep: Duration = .seconds(2)) {
        self.concurrentBuilds = concurrentBuilds
        self.maxKept = maxKept
        self.keep = keep
    }

    /// The page built ahead for `key`, waiting for it if it is still being
    /// built; nil when there is none (or it failed, or went stale).
    func take(_ key: Key) -> PullService.Page? {
        lock.lock()
        let entry = entries.removeValue(forKey: key)
        lock.unlock()
        guard let entry else { return nil }
        // A build takes milliseconds; one stuck behind a lock is not waited for long.
        guard entry.done.wait(timeout: .now() + 2) == .success else { return nil }
        guard ContinuousClock.now - entry.made < keep else { return nil }
        return entry.page
    }

    /// Builds the page for `key` ahead, unless one is already kept or
    /// being built for it, or as many builds as allowed are running.
    func build(_ key: Key, _ make: @escaping @Sendable () throws -> PullService.Page) {
        let now = ContinuousClock.now
        lock.lock()
        entries = entries.filter { now - $0.value.made < keep }
        guard entries[key] == nil, building < concurrentBuilds, entries.count < maxKept else {
            lock.unlock()
            return
        }
        let entry = Entry()
        entries[key] = entry
        building += 1
        lock.unlock()
        queue.async { [self] in
            let page = try? make()
            lock.lock()
            entry.page = page
            building -= 1
            lock.unlock()
            entry.done.signal()
        }
    }

    /// Drops every page kept or being built: a commit was heard.
    func dropAll() {
        lock.lock()
        entries.removeAll()
        lock.unlock()
    }

    /// Pages kept or being built (tests).
    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return entries.count
    }
}
