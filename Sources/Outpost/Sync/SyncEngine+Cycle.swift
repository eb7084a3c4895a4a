public import Foundation
import OutpostCore

/// A cycle that a newer generation replaced: its answers are dropped.
struct StaleGeneration: Error {}

extension SyncEngine {
    var client: ServerClient {
        // Which device is calling, on every request: the server's console shows when each was last heard from.
        var identity = options.identityHeaders
        identity["Outpost-Device"] = store.clientID.wireText
        return ServerClient(
            transport: transport, token: token, timeout: options.requestTimeout, clock: clock, identity: identity,
            encodings: requestEncodings)
    }

    /// One sync cycle: push everything that can go, then pull until up to date.
    func runCycle(_ trigger: SyncTrigger, generation: UInt64, pulls: Bool = true) async -> SyncReport {
        var report = SyncReport(trigger: trigger)
        let started = clock.now()
        let networkBefore = connectivity.state
        showSyncing(true)
        defer {
            showSyncing(false)
            emitTelemetry(SyncTelemetryEvent(report, networkBefore: networkBefore, connectivity: connectivity, duration: clock.now() - started))
        }
        if token == nil, credentials != nil, !status.signInRequired {
            // The app's sign-in gives the first token; never asked offline,
            // where it could not refresh anything either.
            if connectivity.state == .offline {
                report.failure = .offline
                return report
            }
            do {
                if try await !obtainToken(.start) {
                    status.signInRequired = true
                    emit(.signInRequired)
                }
            } catch let failure as SyncFailure {
                report.failure = failure
                status.lastError = failure
                scheduleRetry(after: failure)
                return report
            } catch {
                report.failure = .noAnswer
                return report
            }
        }
        if status.signInRequired || status.lastError == .accessRevoked {
            // An expired token never authorises a server call.
            report.failure = status.signInRequired ? .signInRequired : .accessRevoked
            return report
        }
        // Asked again, once per cycle, when the server refuses the token.
        var freshTokenTried = false
        cycle: while true {
            let tokenAtStart = token
            do {
                // Push trouble never stops the pull: a refused request or a
                // damaged queue entry must not keep other people's changes (and
                // catalogs) from arriving. Only failures the pull would meet
                // too (no network, no answer, busy, signed out) end the cycle.
                var pushFailure: (any Error)?
                do {
                    try await sendPhase(generation, &report)
                } catch let failure as SyncFailure where !failure.stopsThePull {
                    pushFailure = failure
                } catch let error where !(error is SyncFailure || error is StaleGeneration || error is CancellationError) {
                    pushFailure = error
                }
                if pulls {
                    // A live page still being stored lands before this snapshot, never after it.
                    await awaitLiveApply()
                    try await pullPhase(generation, &report)
                }
                if let pushFailure { throw pushFailure }
                report.held = try await store.heldEntries()
                schedule.succeeded()
                status.lastError = nil
                status.updateRequired = false
            } catch is StaleGeneration {
                report.failure = .noAnswer
            } catch let failure as SyncFailure {
                report.failure = failure
                if !schedule.isCurrent(generation) {
                    // An abandoned cycle (a reconnection replaced it): its failure
                    // says nothing about the network now and must not start a backoff.
                    return report
                }
                if failure == .signInRequired && token != tokenAtStart {
                    // Refused with a token replaced meanwhile: the new one has not been tried.
                    schedule.requestFollowUp(.manual)
                } else if failure == .signInRequired, !freshTokenTried, let refused = tokenAtStart, credentials != nil,
                    (try? await obtainToken(.refused(refused))) == true
                {
                    // The app's sign-in gave a fresh token: try it at once, in this cycle.
                    freshTokenTried = true
                    report = SyncReport(trigger: trigger)
                    continue cycle
                } else {
                    await handle(failure)
                }
            } catch is CancellationError {
                report.failure = .noAnswer
            } catch let error as OutboxError {
                // The server's answer broke the protocol (e.g. a result for another record).
                report.failure = .invalidAnswer("\(error)")
                status.lastError = report.failure
            } catch {
                // The device's own storage failed: a local fault, said as such.
                report.failure = .localStorage("\(error)")
                status.lastError = report.failure
            }
            break
        }
        progress = nil
        return report
    }

    private func handle(_ failure: SyncFailure) async {
        status.lastError = failure
        switch failure {
        case .signInRequired:
            status.signInRequired = true
            emit(.signInRequired)
        case .accessRevoked:
            emit(.accessRevoked)
        case .updateRequired:
            status.updateRequired = true
        case let failure where failure.isTransient:
            scheduleRetry(after: failure)
        default:
            break
        }
    }

    // MARK: Push

    func pushPhase(_ generation: UInt64, _ report: inout SyncReport) async throws {
        // Halved while narrowing a whole-request refusal down to its culprit;
        // kept for the rest of the cycle once the culprit is found.
        var limit = options.pushBatchSize
        var renumbering = RenumberingBudget()
        var learnt = false
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
                let count = min(limit, published?.maxMutations ?? .max)
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
                        let step = try await refused(batch, failure.failure, renumbering: &renumbering, limit: &limit, report: &report)
                        if !learnt, case .refused(let body) = failure.failure, Self.narrowable.contains(body.code) {
                            // Refused whole: the server's limits say how to size what follows.
                            learnt = true
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
                        return try await refused(batch, failure.failure, renumbering: &renumbering, limit: &limit, report: &report)
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

    /// A push answered with an error for the whole request.
    private func refused(
        _ batch: PushBatch, _ failure: SyncFailure, renumbering: inout RenumberingBudget, limit: inout Int,
        report: inout SyncReport
    ) async throws -> PushStep {
        guard case .refused(let body) = failure else {
            try await store.release(batch, failure: Self.pushFailure(failure))
            throw failure
        }
        if body.code == .clientBehind, let lastSeq = body.lastSeq, let seqs = body.seqs {
            // A restored or copied database: the listed seqs name other
            // mutations on the server. Renumber exactly those, then resend.
            let listed = Set(seqs)
            guard renumbering.allows(Set(batch.entries.filter { $0.seq.map(listed.contains) ?? false }.map(\.entry))) else {
                try await store.release(batch, failure: .transient("client_behind again after renumbering"))
                throw SyncFailure.invalidAnswer("The server kept answering client_behind after the device renumbered its changes.")
            }
            _ = try await store.renumber(batch, seqs: seqs, serverLastSeq: lastSeq)
            return .next
        }
        if Self.narrowable.contains(body.code) {
            if batch.entries.count > 1 {
                // One bad mutation spoils the request for all: split until it is alone.
                try await store.release(batch, failure: .notSent("refused whole (\(body.code)); splitting the batch"))
                limit = max(1, batch.entries.count / 2)
                return .next
            }
            // Alone and still refused: this mutation is at fault. It is
            // rejected with the server's words, and the queue goes on.
            await store.endLease(batch, failure: .notSent("refused"))
            report.rejected += try await store.rejectLocally(batch.entries, code: body.code.rawValue, message: body.message)
            return .next
        }
        try await store.release(batch, failure: Self.pushFailure(failure))
        throw failure
    }

    /// Whole-request refusals that one mutation can cause (a value too deep
    /// or too large, a body over the limit): narrowed down by splitting.
    /// (Other refusals, a 404 from a wrong address say, are no mutation's
    /// fault: they count against the entries' retry budget instead.)
    static let narrowable: Set<ErrorCode> = [
        .invalidJSON, .invalidRequest, .payloadTooLarge, ErrorCode("http_400"), ErrorCode("http_413"), ErrorCode("http_422"),
    ]

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

    // MARK: Pull

    private func pullPhase(_ generation: UInt64, _ report: inout SyncReport) async throws {
        var resyncs = 0
        while true {
            do {
                try await pullPages(generation, &report)
                return
            } catch SyncFailure.refused(let body) where body.code == .resyncRequired && resyncs == 0 {
                // Too long away (or the scope changed): download again, keeping the outbox.
                resyncs += 1
                try await store.beginResync()
            }
        }
    }

    /// Pages of a pull read ahead of the store: three pages of 5,000
    /// records cover the longest checkpoint seen in a first download.
    static let pullPagesAhead = 3

    private func pullPages(_ generation: UInt64, _ report: inout SyncReport) async throws {
        let plan = try await scopePlan(generation)
        let cursor = try await store.pullState(collections: plan.collections).cursor
        // The device's own writes whose answers it holds stay on the server
        // (a store only ever holds more of them as the pull goes on).
        let own = try await store.ownAnswersHeld().flatMap { $0 > 0 ? (client: store.clientID, through: $0) : nil }
        // Pages are requested ahead while the store writes (see PullPageChain).
        let client = self.client
        let limit = options.pullPageSize
        var chain = PullPageChain(after: cursor, depth: Self.pullPagesAhead, following: { $0.body.hasMore ? $0.body.cursor : nil }) {
            cursor in
            try await client.pull(collections: plan.collections, cursor: cursor, limit: limit, windowStart: plan.windowStart, own: own)
        }
        defer { chain.cancel() }
        if cursor == nil {
            progress = SyncProgress(done: 0, total: plan.total)
            await publishStatus()
        }
        while true {
            guard schedule.isCurrent(generation) else { throw StaleGeneration() }
            let page: RawPullPage
            do {
                guard let answer = try await chain.next() else { return }
                page = answer.body
                await record(.answered(latency: answer.latency))
            } catch let failure as ServerClient.Failure {
                await record(failure)
                throw failure.failure
            }
            // A slow answer from before a newer cycle never overwrites fresher data.
            guard schedule.isCurrent(generation) else { throw StaleGeneration() }
            let result = try await store.applyPull(page, collections: plan.collections)
            noteFeedPosition(page)
            report.add(result)
            // The page queued deletes of records that came back, or freed
            // changes held behind a refused create: they go out next.
            if result.redeleted + result.unblocked > 0, schedule.followUp == nil { schedule.requestFollowUp(.localChange) }
            if var current = progress {
                current.done = min(current.total, current.done + Int64(result.applied + result.keptLocal))
                progress = current
            }
            if !page.hasMore {
                if var current = progress {
                    current.done = current.total
                    progress = current
                }
                return
            }
            // Between pages only the progress moves; the store-wide counts
            // (a COUNT over every table) wait for the end of the cycle.
            publishProgress()
        }
    }

    /// What to download: collections, window and the exact total. Decided
    /// once per account from the role and the scope's size, then kept.
    struct ScopePlan {
        var mode: ScopeMode
        var collections: [String]
        var windowStart: ServerTimestamp?
        var total: Int64
    }

    private func scopePlan(_ generation: UInt64) async throws -> ScopePlan {
        let all = store.syncedCollections
        var mode = try await store.metadata("scope.mode").flatMap(ScopeMode.init(rawValue:))
        var windowStart = try await store.metadata("scope.window_start").map(ServerTimestamp.init(rawValue:))
        let needsTotals = try await store.pullState(collections: all).cursor == nil || mode == nil
        var total: Int64 = 0
        if needsTotals {
            var scope = try await fetch { try await $0.scope() }
            if mode == nil {
                let rows = scope.collections.filter { !$0.value.readOnly }.reduce(0) { $0 + $1.value.count }
                switch options.scopeMode ?? Self.defaultMode(for: scope.role) {
                case .full: mode = .full
                case .onlineWithCache: mode = .onlineWithCache
                case .capped:
                    mode = .capped
                    if rows > options.capRows {
                        // The window is reckoned on the server's clock, never the device's.
                        let now = try await health().serverTime.date ?? Date()
                        windowStart = ServerTimestamp(now - options.capWindow)
                        scope = try await fetch { [windowStart] in try await $0.scope(windowStart: windowStart) }
                    }
                }
                try await store.setMetadata("scope.mode", mode?.rawValue)
                try await store.setMetadata("scope.window_start", windowStart?.rawValue)
            }
            scopeTotals = scope.collections.mapValues(\.count)
            guard schedule.isCurrent(generation) else { throw StaleGeneration() }
        }
        let collections = mode == .onlineWithCache ? ["catalogs"] : all
        total = collections.reduce(0) { $0 + (scopeTotals[$1] ?? 0) }
        return ScopePlan(mode: mode ?? .full, collections: collections, windowStart: windowStart, total: total)
    }

    static func defaultMode(for role: Role) -> ScopeMode {
        switch role {
        case .field: return .full
        case .coordinator: return .capped
        case .admin: return .onlineWithCache
        }
    }

    /// One server call whose failure also updates connectivity.
    /// `GET /v1/health`, keeping the limits the server publishes in it.
    func health() async throws -> HealthResponse {
        let health = try await fetch { try await $0.health() }
        if let limits = health.limits { try? await store.learnServerLimits(limits) }
        return health
    }

    func fetch<Body: Sendable>(_ call: @Sendable (ServerClient) async throws -> ServerClient.Answer<Body>) async throws -> Body {
        do {
            let answer = try await call(client)
            await record(.answered(latency: answer.latency))
            return answer.body
        } catch let failure as ServerClient.Failure {
            await record(failure)
            throw failure.failure
        }
    }

    // MARK: Online with cache

    /// Searches the server (records outside what is downloaded) and caches
    /// what it returns, so opened records stay readable offline.
    public func searchRemote(_ collection: String, _ text: String, limit: Int = 50) async throws -> [JSONRecord] {
        guard !status.signInRequired else { throw SyncFailure.signInRequired }
        let found = try await fetch { try await $0.search(collection: collection, query: text, limit: limit) }
        try await store.cacheRemote(found.records)
        var records: [JSONRecord] = []
        for record in found.records {
            if let cached = try await store.get(in: record.collection, record.uuid) { records.append(cached) }
        }
        return records
    }

    /// Fetches one record from the server and caches it.
    public func fetchRemote(_ collection: String, _ uuid: UUID) async throws -> JSONRecord? {
        guard !status.signInRequired else { throw SyncFailure.signInRequired }
        let record = try await fetch { try await $0.record(collection: collection, uuid: uuid) }
        try await store.cacheRemote([record])
        return try await store.get(in: collection, uuid)
    }
}

