import Foundation
import OutpostCore

/// A cycle's push state, as a value: how many entries go in one request,
/// and what a refusal of a whole request leads to. The pushes themselves
/// (I/O) are the engine's, below.
package struct PushPipeline {
    /// Entries per push: halved while narrowing a whole-request refusal down
    /// to its culprit, kept for the rest of the cycle once it is found.
    package private(set) var limit: Int
    private var renumbering = RenumberingBudget()
    /// The server's limits were asked after a whole refusal (once a cycle).
    private var limitsLearnt = false

    package init(limit: Int) { self.limit = limit }

    /// What to do with a batch whose request was refused whole.
    package enum Refusal: Equatable {
        /// A restored or copied database: the listed seqs name other
        /// mutations on the server. Renumber exactly those, then resend.
        case renumber(seqs: [Int64], serverLastSeq: Int64)
        /// `client_behind` again and again for the same changes: the cycle stops.
        case renumberingFruitless
        /// One bad mutation spoils the request for all: the batch goes back
        /// and the next one is half as large, until the culprit is alone.
        case split(ErrorCode)
        /// Alone and still refused: this mutation is at fault, and is
        /// rejected with the server's words; the queue goes on.
        case reject(ErrorBody)
        /// No mutation's fault: the batch goes back with this outcome and
        /// the cycle ends with the failure.
        case release(PushFailure)
    }

    /// Decides what a whole-request `failure` of a batch of `entries` (their
    /// outbox ids and seqs) leads to.
    package mutating func refused(_ failure: SyncFailure, entries: [(entry: Int64, seq: Int64?)]) -> Refusal {
        guard case .refused(let body) = failure else { return .release(Self.pushFailure(failure)) }
        if body.code == .clientBehind, let lastSeq = body.lastSeq, let seqs = body.seqs {
            let listed = Set(seqs)
            let renumbered = Set(entries.filter { $0.seq.map(listed.contains) ?? false }.map(\.entry))
            guard renumbering.allows(renumbered) else { return .renumberingFruitless }
            return .renumber(seqs: seqs, serverLastSeq: lastSeq)
        }
        if Self.narrowable.contains(body.code) {
            guard entries.count > 1 else { return .reject(body) }
            limit = max(1, entries.count / 2)
            return .split(body.code)
        }
        return .release(Self.pushFailure(failure))
    }

    /// Whether to ask the server's limits after `failure`: the first
    /// whole refusal one mutation can cause says how to size what follows.
    package mutating func shouldLearnLimits(after failure: SyncFailure) -> Bool {
        guard !limitsLearnt, case .refused(let body) = failure, Self.narrowable.contains(body.code) else { return false }
        limitsLearnt = true
        return true
    }

    /// How often a cycle renumbers after `client_behind`. A restored or
    /// copied database meets it once for each batch while its old seqs run
    /// out (once per change when batches are down to one); that is progress.
    /// The same changes listed again and again is not: three times, and the
    /// cycle stops.
    struct RenumberingBudget {
        private var renumbered: Set<Int64> = []
        private var fruitless = 0

        mutating func allows(_ entries: Set<Int64>) -> Bool {
            fruitless = entries.isSubset(of: renumbered) ? fruitless + 1 : 0
            renumbered.formUnion(entries)
            return fruitless < 3
        }
    }

    /// Whole-request refusals that one mutation can cause (a value too deep
    /// or too large, a body over the limit): narrowed down by splitting.
    /// (Other refusals, a 404 from a wrong address say, are no mutation's
    /// fault: they count against the entries' retry budget instead.)
    static let narrowable: Set<ErrorCode> = [
        .invalidJSON, .invalidRequest, .payloadTooLarge, ErrorCode("http_400"), ErrorCode("http_413"), ErrorCode("http_422"),
    ]

    /// How a batch goes back after `failure`: what it says of the entries'
    /// fate, and whether it counts against their retry budget.
    static func pushFailure(_ failure: SyncFailure) -> PushFailure {
        switch failure {
        case .offline: return .notSent("offline")
        case .noAnswer, .invalidAnswer, .timedOut, .localStorage: return .unknownOutcome("no answer")
        case .serverBusy: return .transient("server busy")
        case .signInRequired: return .notSent("sign-in required")
        case .accessRevoked: return .notSent("access revoked")
        case .credentialsUnavailable: return .notSent("no token")
        // Nothing applied; the same outbox goes after the app's update.
        case .updateRequired: return .notSent("update required")
        case .refused(let body): return .permanent("\(body.code): \(body.message)")
        }
    }
}

extension SyncEngine {
    /// Pushes everything that can go, one batch on the wire and the next
    /// taken meanwhile; refusals of a whole request are decided by a
    /// ``PushPipeline`` of the cycle.
    func pushPhase(_ generation: UInt64, _ report: inout SyncReport) async throws {
        var pipeline = PushPipeline(limit: options.pushBatchSize)
        // The push sent the moment the one before it was answered, whose
        // answer comes next. (The device takes each batch while the one
        // before is on the wire and settles each while the next is: its own
        // work overlaps the server's instead of adding to it. It goes when
        // the answer's head says 200, before the answer's body is read.)
        var sending: OutgoingPush?
        // Some changes went unanswered: the push still out is settled, then the cycle stops.
        var stopping = false
        do {
            while true {
                // Under the server's published limits once they are known.
                let published = await store.serverLimits
                let maxBytes = min(options.pushBatchBytes, published.map { CaptureLimits(limits: $0).batchBytes } ?? .max)
                let count = min(pipeline.limit, published?.maxMutations ?? .max)
                let push: OutgoingPush
                if let carried = sending {
                    push = carried
                    sending = nil
                } else {
                    if stopping { return }
                    guard schedule.isCurrent(generation) else { throw StaleGeneration() }
                    let spent = try await store.entriesWithSpentBudget(options.retry.budget)
                    if !spent.isEmpty {
                        // Refused again and again for reasons no split could pin down:
                        // these entries stop, visibly, and only they do.
                        for entry in spent {
                            report.rejected += try await store.rejectLocally(
                                [entry], code: "retry_budget_spent",
                                message: "Refused \(entry.failures) times: \(entry.lastError ?? "no reason given")")
                        }
                    }
                    guard let batch = try await store.takePushBatch(limit: count, maxBytes: maxBytes) else { return }
                    report.sent += batch.entries.count
                    // On the wire first: the status (a few counts over the
                    // store) is published while the server works, once the
                    // push is out (as for settling, below).
                    push = OutgoingPush(batch, requestEncodings.prepare(batch.body), client)
                    await push.bodySent(within: options.bodyOutWait)
                    await publishStatus()
                }
                let batch = push.batch
                let step = try await leasing(batch) { () async throws -> PushStep in
                    // The next batch is taken while this one is out (never sent before this one is answered).
                    let ahead =
                        stopping
                        ? nil
                        : try? await store.takePushBatch(after: batch, limit: count, maxBytes: maxBytes)
                    // Its body made ready (deflated) while this one is out, too.
                    let aheadBody = ahead.map { requestEncodings.prepare($0.body) }
                    // The server answers a push only once it is done with
                    // it, and the next batch holds nothing that depends on
                    // how this one ends: it goes the moment this answer's
                    // head says 200, and travels while the answer's body does
                    // (on loopback 1.2-2 ms of each push, the server idle).
                    if let ahead, await push.status() == 200, schedule.isCurrent(generation) {
                        report.sent += ahead.entries.count
                        sending = OutgoingPush(ahead, requestEncodings.prepare(ahead.body, reusing: aheadBody), client)
                    }
                    // Taken and still on the device: given back if this push fails.
                    let unsent = sending == nil ? ahead : nil
                    let answer: ServerClient.Answer<Data>
                    do {
                        answer = try await push.answer()
                    } catch let failure as ServerClient.Failure {
                        // When the push ahead is out (the head came, the body
                        // never did), the cycle ends below and abandons it.
                        if let unsent { await store.giveBack(unsent) }
                        await record(failure)
                        let step = try await refused(batch, failure.failure, pipeline: &pipeline, report: &report)
                        if pipeline.shouldLearnLimits(after: failure.failure) {
                            // Refused whole: the server's limits say how to size what follows.
                            _ = try? await health()
                        }
                        return step
                    } catch {
                        if let unsent { await store.giveBack(unsent) }
                        throw error
                    }
                    guard schedule.isCurrent(generation) else {
                        // An answer for an abandoned cycle: resent later with the same seqs.
                        if let unsent { await store.giveBack(unsent) }
                        await store.endLease(batch, failure: .unknownOutcome("answer arrived for an older cycle"))
                        throw StaleGeneration()
                    }
                    if let unsent {
                        // Answered 200 without a 200 head first (a transport
                        // that tells no head, or a push resent plain after
                        // its deflated body was refused): the next push goes
                        // now, before this answer is even read (its bytes can
                        // only settle this batch).
                        report.sent += unsent.entries.count
                        sending = OutgoingPush(unsent, requestEncodings.prepare(unsent.body, reusing: aheadBody), client)
                    }
                    if let sending {
                        // Reading and settling this answer wait until the
                        // push behind it is out (briefly: `bodyOutWait`).
                        // They would otherwise take the core from the
                        // thread sending it: on a core of its own, the
                        // device's push reached the server 2-4 ms late, the
                        // server idle. That push's answer, the next thing
                        // waited for, cannot come before its body is out.
                        await sending.bodySent(within: options.bodyOutWait)
                    }
                    let response: PushResponse
                    do {
                        response = try ServerClient.readPush(answer).body
                        await record(.answered(latency: answer.latency))
                    } catch let failure as ServerClient.Failure {
                        // Unreadable: this batch's outcome is unknown. The
                        // push ahead is out; the cycle ends and abandons it
                        // too, and both are resent with their seqs.
                        await record(failure)
                        return try await refused(batch, failure.failure, pipeline: &pipeline, report: &report)
                    }
                    let settlement = try await store.settle(batch, with: response)
                    report.add(settlement)
                    await refreshAdoptedOriginals(settlement.adoptedOriginals)
                    if sending != nil { await publishStatus() }
                    return settlement.unanswered.isEmpty ? .next : .stop
                }
                if step == .stop { stopping = true }
            }
        } catch {
            // A push still out is abandoned with the cycle: its outcome is
            // unknown, and its entries are resent with the same seqs.
            if let sending {
                sending.task.cancel()
                await store.endLease(sending.batch, failure: .unknownOutcome("push abandoned: \(error)"))
            }
            throw error
        }
    }

    /// A push on the wire: its batch and the request.
    struct OutgoingPush {
        let batch: PushBatch
        let task: Task<ServerClient.Answer<Data>, any Error>
        /// The answer's status, as soon as its head arrives.
        private let statuses: AsyncStream<Int>
        /// Ends when the body has gone out (or the answer came, or the push ended).
        private let out: AsyncStream<Never>

        /// `body`: the batch's body as it goes on the wire (`RequestEncodings.prepare`).
        init(_ batch: PushBatch, _ body: OutgoingBody, _ client: ServerClient) {
            self.batch = batch
            let (statuses, heads) = AsyncStream.makeStream(of: Int.self)
            let (out, sent) = AsyncStream.makeStream(of: Never.self)
            self.statuses = statuses
            self.out = out
            task = Task {
                defer {
                    sent.finish()
                    heads.finish()
                }
                return try await client.push(body: body) { progress in
                    switch progress {
                    case .bodySent:
                        sent.finish()
                    case .head(let status):
                        sent.finish()
                        heads.yield(status)
                    case .headers:
                        break
                    }
                }
            }
        }

        /// Returns once the request's body has gone out, its answer's head
        /// came (a server may answer before reading a body) or it ended, or
        /// after `limit`, whichever comes first.
        func bodySent(within limit: Duration) async {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for await _ in out {} }
                group.addTask { try? await Task.sleep(for: limit) }
                await group.next()
                group.cancelAll()
            }
        }

        /// The status of the answer's (first) head, once it arrives; nil
        /// when the push ends without one (or the waiter is cancelled).
        /// Asked at most once.
        func status() async -> Int? {
            for await status in statuses { return status }
            return nil
        }

        /// Its answer's bytes; cancelling the waiter cancels the request.
        func answer() async throws -> ServerClient.Answer<Data> {
            try await withTaskCancellationHandler { try await task.value } onCancel: { [task] in task.cancel() }
        }
    }

    enum PushStep { case next, stop }

    /// A `duplicate` hands back the record as the first processing left it.
    /// If the record changed on the server since, and a pull saw that while
    /// this change was still waiting (and so left it alone), the device would
    /// show the old copy for ever: read the current one. Best effort — on
    /// failure the next change to the record, or a resync, brings it.
    private func refreshAdoptedOriginals(_ records: [RecordReference]) async {
        for reference in records.prefix(50) {
            do {
                let current = try await fetch { try await $0.record(collection: reference.collection, uuid: reference.uuid) }
                try await store.refreshFromServer(current, reference)
            } catch SyncFailure.refused(let body) where body.code == .notFound {
                try? await store.refreshFromServer(nil, reference)
            } catch {
                return
            }
        }
    }

    /// Runs one push with its batch leased: every way out that did not
    /// settle or release it (a throwing settlement, a local I/O error, a
    /// cancellation) ends the lease, so the queue can never stay "sending".
    private func leasing(_ batch: PushBatch, _ body: () async throws -> PushStep) async throws -> PushStep {
        do {
            let step = try await body()
            await store.endLease(batch, failure: .unknownOutcome("push ended without a settlement"))
            return step
        } catch {
            await store.endLease(batch, failure: .unknownOutcome("push interrupted: \(error)"))
            throw error
        }
    }

    /// A push answered with an error for the whole request: the pipeline
    /// decides, this performs it on the store.
    private func refused(
        _ batch: PushBatch, _ failure: SyncFailure, pipeline: inout PushPipeline, report: inout SyncReport
    ) async throws -> PushStep {
        switch pipeline.refused(failure, entries: batch.entries.map { (entry: $0.entry, seq: $0.seq) }) {
        case .renumber(let seqs, let serverLastSeq):
            _ = try await store.renumber(batch, seqs: seqs, serverLastSeq: serverLastSeq)
            return .next
        case .renumberingFruitless:
            try await store.release(batch, failure: .transient("client_behind again after renumbering"))
            throw SyncFailure.invalidAnswer("The server kept answering client_behind after the device renumbered its changes.")
        case .split(let code):
            try await store.release(batch, failure: .notSent("refused whole (\(code)); splitting the batch"))
            return .next
        case .reject(let body):
            await store.endLease(batch, failure: .notSent("refused"))
            report.rejected += try await store.rejectLocally(batch.entries, code: body.code.rawValue, message: body.message)
            return .next
        case .release(let pushFailure):
            try await store.release(batch, failure: pushFailure)
            throw failure
        }
    }
}
