import OutpostCore

/// One page's `changes` event, made once for every stream that sends it:
/// all of it but the cursor and the server time, plain and deflated.
///
/// A commit to a team wakes every stream of the team, each at the same
/// position: they read one page (the hub shares it), and with this they
/// also share its JSON and its compressed bytes. What differs per stream
/// is the tail: the cursor, which names the reader's scope, and the time.
final class ChangesEvent: Sendable {
    /// The page as read, without its body (the head holds the JSON).
    let page: PullService.Page
    /// Whether the page moves its reader's cursor: false for an empty page
    /// that gave back the cursor it was asked after, which every stream
    /// sharing it then keeps as it is (its own scope's).
    let movesCursor: Bool
    /// `event: changes`, `data: ` and the page's body up to the cursor's value.
    let head: [UInt8]
    private struct Made {
        var deflated: DeflatedSegment??
        /// Cursors by scope tag, plain and as JSON: the users of one team each have their own.
        var cursors: [String: (text: String, quoted: [UInt8])] = [:]
    }
    private let made = Locked(Made())

    /// `after`: the cursor the page was read after.
    init(page: PullService.Page, after: String?) {
        var slim = page
        (slim.body, slim.changesRange, slim.encoded) = ([], 0..<0, nil)
        self.page = slim
        movesCursor = page.cursor != after
        var head = Self.eventStart
        head.reserveCapacity(Self.eventStart.count + page.changesRange.count + PullService.Page.opening.count + 16)
        head += PullService.Page.opening
        head += page.changesJSON
        head.append(UInt8(ascii: "]"))
        head += WireKey.cursor.member
        self.head = head
    }

    static let eventStart = Array("event: \(LiveEventName.changes.rawValue)\ndata: ".utf8)

    /// The head deflated as a segment, made by the first stream that asks
    /// (nil where zlib is not).
    var deflatedHead: DeflatedSegment? {
        if let known = made.withLock({ $0.deflated }) { return known }
        // Made outside the lock so streams asking for cursors do not wait;
        // two streams racing here make the same bytes, and the first kept wins.
        let segment = EventDeflater.segment(head)
        return made.withLock { made in
            if let kept = made.deflated { return kept }
            made.deflated = .some(segment)
            return segment
        }
    }

    /// The page's cursor for a reader whose scope has `tag` (as the reader
    /// itself got it: its position and purge mark, its scope's tag).
    func cursor(scopeTag tag: String) -> String { cursorForms(scopeTag: tag).text }

    private func cursorForms(scopeTag tag: String) -> (text: String, quoted: [UInt8]) {
        if let known = made.withLock({ $0.cursors[tag] }) { return known }
        let text = PullCursorCodec.encode(page.lastVersion, purgedThrough: page.purgedThrough, scopeTag: tag)
        var quoted: [UInt8] = []
        JSONWriter.writeString(text, to: &quoted)
        made.withLock { $0.cursors[tag] = (text, quoted) }
        return (text, quoted)
    }

    /// What follows the head for one reader: its cursor, `has_more`, the
    /// server's time and the event's end.
    func tail(cursor: String, serverTime: ServerTimestamp) -> [UInt8] {
        var tail: [UInt8] = []
        tail.reserveCapacity(cursor.utf8.count + 80)
        JSONWriter.writeString(cursor, to: &tail)
        Self.close(&tail, hasMore: page.hasMore, serverTime: serverTime)
        return tail
    }

    /// The same, with the cursor made for `tag` (kept for the next reader of that scope).
    func tail(scopeTag tag: String, serverTime: ServerTimestamp) -> [UInt8] {
        var tail = cursorForms(scopeTag: tag).quoted
        Self.close(&tail, hasMore: page.hasMore, serverTime: serverTime)
        return tail
    }

    private static func close(_ tail: inout [UInt8], hasMore: Bool, serverTime: ServerTimestamp) {
        tail += WireKey.hasMore.member(hasMore)
        tail += WireKey.serverTime.member
        tail.append(UInt8(ascii: "\""))
        tail += serverTime.rawValue.utf8
        tail += Array(#""}"#.utf8) + [UInt8(ascii: "\n"), UInt8(ascii: "\n")]
    }
}
