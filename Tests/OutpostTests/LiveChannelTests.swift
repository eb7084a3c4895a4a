import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

/// The live channel's state alone: events in, state out.
@Suite("Live channel", .timeLimit(.minutes(1)))
struct LiveChannelTests {
    static func page(versions: [Int64]) throws -> RawPullPage {
        let time = "2026-11-29T10:00:00.000000Z"
        let changes = versions.map { version in
            #"{"collection": "people", "uuid": "\#(UUID().wireText)", "id": \#(version), "version": \#(version), "updated_at": "\#(time)", "deleted": false, "owner": "u", "team": "t", "data": {"name": "Ana"}}"#
        }
        let body = #"{"changes": [\#(changes.joined(separator: ", "))], "cursor": "c", "has_more": false, "server_time": "\#(time)"}"#
        return try RawPullPage.parse(Data(body.utf8))
    }

    /// The channel's state on an actor, as the engine holds it.
    actor Applies {
        var channel = LiveChannel()
        func started() { channel.applyStarted() }
        func ended() { channel.applyEnded() }
        func waitForApplies() async {
            guard channel.applying > 0 else { return }
            await withCheckedContinuation { channel.waitForApplies($0) }
        }
    }

    @Test func aCyclesWaitForLivePagesEndsOnceTheLastIsStored() async throws {
        let applies = Applies()
        await applies.waitForApplies()  // None stored now: no wait.
        await applies.started()
        await applies.started()
        let done = Locked(false)
        let waiter = Task {
            await applies.waitForApplies()
            done.withLock { $0 = true }
        }
        await applies.ended()
        try await Task.sleep(for: .milliseconds(100))
        #expect(!done.current, "one page is still being stored")
        await applies.ended()
        try await eventually("the wait to end once no page is being stored", timeout: .seconds(10)) { done.current }
        _ = await waiter.value
        #expect(await applies.channel.applying == 0)
    }

    @Test func aClosedChannelsGenerationIsOver() {
        var channel = LiveChannel()
        let first = channel.open()
        #expect(channel.isCurrent(first))
        channel.close()
        #expect(!channel.isCurrent(first), "what the closed channel still delivers is dropped")
        let second = channel.open()
        #expect(second != first)
        #expect(channel.isCurrent(second))
        channel.abandon()
        #expect(!channel.isCurrent(second))
    }

    @Test func onlyTheCurrentLoopsSleepIsShown() {
        var channel = LiveChannel()
        let old = channel.open()
        let current = channel.open()
        channel.sleeps(until: .seconds(5), generation: old)
        #expect(channel.sleepingUntil == nil, "a replaced loop's sleep is not the channel's")
        channel.sleeps(until: .seconds(7), generation: current)
        #expect(channel.sleepingUntil == .seconds(7))
        channel.woke(generation: old)
        #expect(channel.sleepingUntil == .seconds(7))
        channel.woke(generation: current)
        #expect(channel.sleepingUntil == nil)
        channel.sleeps(until: .seconds(9), generation: current)
        channel.close()
        #expect(channel.sleepingUntil == nil, "closing ends the sleep shown")
        let next = channel.open()
        channel.sleeps(until: .seconds(11), generation: next)
        channel.abandon()
        #expect(channel.sleepingUntil == .seconds(11), "a stopped engine leaves the last deadline as it was")
    }

    @Test func heldBackStreamsMeanLongPollsUntilTheRetryOrANetworkChange() {
        var channel = LiveChannel()
        #expect(channel.transport(now: .seconds(1)) == .stream)
        channel.streamsHeldBack(now: .seconds(100))
        #expect(channel.transport(now: .seconds(100)) == .longPoll)
        #expect(channel.transport(now: .seconds(100) + LiveChannel.heldBackStreamsRetry - .seconds(1)) == .longPoll)
        #expect(channel.transport(now: .seconds(100) + LiveChannel.heldBackStreamsRetry) == .stream, "streams are tried again")
        channel.streamsHeldBack(now: .seconds(1_000))
        channel.networkChanged()
        #expect(channel.transport(now: .seconds(1_001)) == .stream, "another network may not hold them back")
    }

    @Test func aPageWithNothingNewerThanTheFeedsPositionIsALateDuplicate() throws {
        var channel = LiveChannel()
        #expect(!channel.isLateDuplicate(try Self.page(versions: [3])))
        channel.stored(try Self.page(versions: [2, 5]))
        #expect(channel.feedHighWater == 5)
        #expect(channel.isLateDuplicate(try Self.page(versions: [4, 5])))
        #expect(!channel.isLateDuplicate(try Self.page(versions: [5, 6])))
        #expect(!channel.isLateDuplicate(try Self.page(versions: [])), "an empty page moves the cursor only")
        channel.stored(try Self.page(versions: [1]))
        #expect(channel.feedHighWater == 5, "the position never moves back")
        channel.wiped()
        #expect(channel.feedHighWater == 0)
        #expect(!channel.isLateDuplicate(try Self.page(versions: [4])))
    }

    @Test func loopsAreCounted() {
        var channel = LiveChannel()
        channel.loopStarted()
        channel.loopStarted()
        channel.loopEnded()
        #expect(channel.loopsRunning == 1)
    }

    @Test func twoSilentStreamsWhoseServerAnsweredMeanStreamsAreHeldBack() {
        var reconnection = LiveChannel.Reconnection()
        #expect(reconnection.silentStream(pullAnswered: true) == .reconnect)
        #expect(reconnection.silentStream(pullAnswered: true) == .heldBack)
        reconnection = LiveChannel.Reconnection()
        #expect(reconnection.silentStream(pullAnswered: true) == .reconnect)
        reconnection.streamEnded()
        #expect(reconnection.silentStream(pullAnswered: true) == .reconnect, "a stream that ran in between starts the count over")
        #expect(reconnection.silentStream(pullAnswered: false) == .noAnswer, "a server answering nobody is not a proxy")
        #expect(reconnection.silentStream(pullAnswered: true) == .reconnect)
    }

    @Test func theBackoffGrowsWithFailuresInARowOnly() {
        var reconnection = LiveChannel.Reconnection()
        #expect(reconnection.failed() == 0)
        #expect(reconnection.failed() == 1)
        #expect(reconnection.failed() == 2)
        reconnection.succeeded()
        #expect(reconnection.failed() == 0)
    }
}
