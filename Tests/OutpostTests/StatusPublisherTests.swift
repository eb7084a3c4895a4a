import Foundation
import Outpost
import OutpostCore
import Testing

/// The status publisher alone: an event in; the status, and whether
/// listeners were sent it, out.
@Suite("Status publisher", .timeLimit(.minutes(1)))
struct StatusPublisherTests {
    @Test func aCycleShowsItselfAtOnceAndOnlyOnce() {
        var publisher = StatusPublisher()
        #expect(publisher.send(.syncing(true, connectivity: .online)) == true)
        #expect(publisher.status.isSyncing)
        #expect(publisher.status.connectivity == .online)
        #expect(publisher.send(.syncing(true, connectivity: .degraded)) == false, "already syncing: nothing to send")
        #expect(publisher.status.connectivity == .online, "an event that sends nothing changes nothing")
        #expect(publisher.send(.syncing(false, connectivity: .online)) == true)
        #expect(!publisher.status.isSyncing)
    }

    @Test func notedChangesReachListenersWithTheNextPublication() async {
        var publisher = StatusPublisher()
        var updates = publisher.subscribe(keeping: 10) { _ in }.makeAsyncIterator()
        #expect(await updates.next() == SyncStatus(), "a listener starts with the status now")
        #expect(publisher.send(.cycleFailed(.signInRequired)) == false, "noted, not sent")
        #expect(publisher.status.signInRequired)
        #expect(publisher.status.lastError == .signInRequired)
        #expect(publisher.send(.live(.connecting, eventAt: nil)) == true)
        let sent = await updates.next()
        #expect(sent?.live == .connecting)
        #expect(sent?.signInRequired == true, "the noted change goes with it")
        #expect(publisher.send(.live(.connecting, eventAt: nil)) == false, "no change, nothing sent")
    }

    @Test func aFailedCycleSaysWhatItMeansForTheSession() {
        var publisher = StatusPublisher()
        publisher.send(.cycleFailed(.updateRequired))
        #expect(publisher.status.updateRequired)
        #expect(!publisher.status.signInRequired)
        publisher.send(.cycleFailed(.accessRevoked))
        #expect(publisher.status.lastError == .accessRevoked)
        #expect(!publisher.status.signInRequired, "revoked access is not a sign-in to redo")
        #expect(publisher.status.updateRequired, "kept until a cycle gets through")
        publisher.send(.cycleSucceeded)
        #expect(publisher.status.lastError == nil)
        #expect(!publisher.status.updateRequired)
        publisher.send(.failed(.credentialsUnavailable("later")))
        #expect(publisher.status.lastError == .credentialsUnavailable("later"))
        #expect(!publisher.status.signInRequired, "a plain failure leaves the session's flags alone")
    }

    @Test func aNewTokenClearsOnlyTheSessionsFailures() {
        var publisher = StatusPublisher(signInRequired: true)
        publisher.send(.failed(.signInRequired))
        publisher.send(.tokenReplaced)
        #expect(!publisher.status.signInRequired)
        #expect(publisher.status.lastError == nil)
        publisher.send(.failed(.accessRevoked))
        publisher.send(.tokenReplaced)
        #expect(publisher.status.lastError == nil)
        publisher.send(.failed(.offline))
        publisher.send(.tokenReplaced)
        #expect(publisher.status.lastError == .offline, "a network failure is not the token's")
    }

    @Test func theDownloadsProgressShowsOnlyWhileACycleRuns() {
        var publisher = StatusPublisher()
        publisher.send(.downloadStarted(total: 100))
        publisher.send(.downloaded(rows: 30))
        #expect(publisher.progress == SyncProgress(done: 30, total: 100))
        #expect(publisher.send(.progressShown(connectivity: .unknown)) == false, "not syncing: no progress shown")
        #expect(publisher.status.progress == nil)
        publisher.send(.syncing(true, connectivity: .online))
        #expect(publisher.status.progress == SyncProgress(done: 30, total: 100))
        publisher.send(.downloaded(rows: 90))
        #expect(publisher.progress == SyncProgress(done: 100, total: 100), "never past the total")
        publisher.send(.downloadStarted(total: 50))
        publisher.send(.downloadFinished)
        #expect(publisher.progress == SyncProgress(done: 50, total: 50))
        #expect(publisher.send(.progressShown(connectivity: .online)) == true)
        #expect(publisher.status.progress == SyncProgress(done: 50, total: 50))
        publisher.send(.downloadEnded)
        #expect(publisher.progress == nil)
        publisher.send(.downloaded(rows: 5))
        #expect(publisher.progress == nil, "rows without a download under way count nowhere")
    }

    @Test func figuresReadBeforeAWipeAreTheLastPersonsAndDropped() {
        var publisher = StatusPublisher()
        publisher.send(.live(.live, eventAt: nil))
        publisher.send(.figures(StoreFigures(conflicts: 2), epoch: 0, connectivity: .online, scopeTotals: [:]))
        #expect(publisher.status.conflicts == 2)
        let readBefore = publisher.epoch
        publisher.send(.wiped)
        #expect(publisher.status.conflicts == 0, "nothing about the last person's data stays")
        #expect(publisher.status.live == .off)
        #expect(publisher.status.connectivity == .online, "the network is the device's, not the person's")
        #expect(publisher.send(.figures(StoreFigures(conflicts: 7), epoch: readBefore, connectivity: .online, scopeTotals: [:])) == false)
        #expect(publisher.status.conflicts == 0)
        let current = publisher.epoch
        #expect(publisher.send(.figures(StoreFigures(conflicts: 1), epoch: current, connectivity: .online, scopeTotals: [:])) == true)
        #expect(publisher.status.conflicts == 1)
    }

    @Test func coverageKeepsCatalogsWholeAndTheWindowOnlyForACappedScope() {
        var publisher = StatusPublisher()
        let window = ServerTimestamp(rawValue: "2026-11-01T00:00:00.000000Z")
        let figures = StoreFigures(counts: ["visits": 40, "catalogs": 3], mode: .capped, windowStart: window)
        publisher.send(.figures(figures, epoch: 0, connectivity: .online, scopeTotals: ["visits": 90]))
        let visits = publisher.status.coverage["visits"]
        #expect(visits?.mode == .capped)
        #expect(visits?.onDevice == 40)
        #expect(visits?.inScope == 90)
        #expect(visits?.windowStart == window)
        let catalogs = publisher.status.coverage["catalogs"]
        #expect(catalogs?.mode == .full)
        #expect(catalogs?.onDevice == 3)
        #expect(catalogs?.inScope == nil)
        #expect(catalogs?.windowStart == nil)
        let again = publisher.send(.figures(figures, epoch: 0, connectivity: .online, scopeTotals: ["visits": 90]))
        #expect(!again, "the same figures send nothing")
    }

    @Test func aLiveEventKeepsTheLastEventsTimeUnlessItBringsOne() {
        var publisher = StatusPublisher()
        let first = ServerTimestamp(rawValue: "2026-11-29T10:00:00.000000Z")
        publisher.send(.live(.live, eventAt: first))
        publisher.send(.live(.polling, eventAt: nil))
        #expect(publisher.status.live == .polling)
        #expect(publisher.status.lastLiveEventAt == first)
        #expect(publisher.send(.stopped) == false)
        #expect(publisher.status.live == .off)
    }

    @Test func uploadsAreNotedAndTheirFiguresShownAtOnce() {
        var publisher = StatusPublisher()
        #expect(publisher.send(.uploadingAttachments(true)) == false)
        var summary = AttachmentSummary()
        summary.waiting = 2
        #expect(publisher.send(.attachments(summary)) == true)
        #expect(publisher.status.isUploadingAttachments)
        #expect(publisher.status.attachments.waiting == 2)
    }

    @Test func refreshesAfterLivePagesAreOneAtATime() {
        var publisher = StatusPublisher()
        #expect(publisher.refreshWanted() == true)
        #expect(publisher.refreshWanted() == false, "one on its way already")
        _ = publisher.refreshStarted(now: .seconds(1))
        #expect(publisher.refreshWanted() == true)
    }

    /// The refresh after live pages reads the figures only when a page was
    /// stored without reading them since they were last read, and counts
    /// as a read for the 200 ms between reads.
    @Test func theRefreshAfterLivePagesReadsOnlyWhatNoPageReadSince() {
        var publisher = StatusPublisher()
        // (milliseconds, a page (true) or the refresh (false)) → whether it read the figures
        let steps: [(Int64, Bool)] = [(1_000, true), (1_100, false), (1_150, true), (1_250, true), (1_300, false), (1_350, true),
            (1_550, false), (1_600, true), (1_750, true)]
        let reads = steps.map { at, page in
            page ? publisher.liveFiguresDue(now: .milliseconds(at)) : publisher.refreshStarted(now: .milliseconds(at))
        }
        #expect(reads == [true, false, false, true, false, false, true, false, true],
            """
            the first page reads them; the refresh after has no page since; the page at 1.15 s is too soon and \
            leaves them to the refresh, but the page at 1.25 s reads them in its own call, so the refresh at \
            1.3 s has nothing to read; the page at 1.35 s leaves them behind and the refresh at 1.55 s reads \
            them, which counts: the page at 1.6 s is too soon, the one at 1.75 s is not
            """)
    }

    @Test func livePagesReadTheFiguresWithThemAtMostOnceIn200Milliseconds() {
        var publisher = StatusPublisher()
        let due = [150, 200, 399, 400].map { publisher.liveFiguresDue(now: .seconds(10) + .milliseconds($0)) }
        #expect(due == [true, false, true, false], "read at 150 ms, not at 200 (50 ms later), at 399 and not at 400")
        // A clock that went back (a new engine clock) does not stop the reads.
        let afterClockWentBack = publisher.liveFiguresDue(now: .seconds(1))
        #expect(afterClockWentBack)
    }

    @Test func figuresOfALivePageMoveOnlyTheCounts() {
        var publisher = StatusPublisher()
        publisher.send(.figures(StoreFigures(conflicts: 2, counts: ["people": 1], mode: .capped), epoch: 0,
            connectivity: .online, scopeTotals: [:]))
        let live = StoreFigures(counts: ["people": 2], mode: .capped)
        let sent = publisher.send(.figures(live, epoch: 0, connectivity: .online, scopeTotals: [:]))
        #expect(sent)
        #expect(publisher.status.conflicts == 2, "the figures a page does not move stay as they were")
        #expect(publisher.status.coverage["people"]?.onDevice == 2)
        #expect(publisher.status.coverage["people"]?.mode == .capped)
    }
}
