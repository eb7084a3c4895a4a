import Foundation
import OutpostCore

/// A cycle that a newer generation replaced: its answers are dropped.
struct StaleGeneration: Error {}

extension SyncEngine {
    var client: ServerClient {
        // Which device is calling, on every request: the server's console shows when each was last heard from.
        var identity = options.identityHeaders
        identity["Outpost-Device"] = store.clientID.wireText
        // And how its outbox stands: the server alerts on a device whose changes stopped leaving it.
        identity[OutboxReport.header] = outboxReport.headerValue
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
        if token == nil, credentials.hasProvider, !status.signInRequired {
            // The app's sign-in gives the first token; never asked offline,
            // where it could not refresh anything either.
            if connectivity.state == .offline {
                report.failure = .offline
                return report
            }
            do {
                if try await !obtainToken(.start) {
                    statusPublisher.send(.signInRequired(true))
                    emit(.signInRequired)
                }
            } catch let failure as SyncFailure {
                report.failure = failure
                statusPublisher.send(.failed(failure))
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
                    if let now = try? await store.outboxReport() { outboxReport = now }
                    try await sendPhase(generation, &report)
                } catch let failure as SyncFailure where !failure.stopsThePull {
                    pushFailure = failure
                } catch let error where !(error is SyncFailure || error is StaleGeneration || error is CancellationError) {
                    pushFailure = error
                }
                if pulls {
                    // A live page still being stored lands before this snapshot, never after it.
                    await awaitLiveApply()
                    if let now = try? await store.outboxReport() { outboxReport = now }
                    try await pullPhase(generation, &report)
                }
                if let pushFailure { throw pushFailure }
                report.held = try await store.heldEntries()
                schedule.succeeded()
                statusPublisher.send(.cycleSucceeded)
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
                } else if failure == .signInRequired, !freshTokenTried, let refused = tokenAtStart, credentials.hasProvider,
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
                let failure = SyncFailure.invalidAnswer("\(error)")
                report.failure = failure
                statusPublisher.send(.failed(failure))
            } catch {
                // The device's own storage failed: a local fault, said as such.
                let failure = SyncFailure.localStorage("\(error)")
                report.failure = failure
                statusPublisher.send(.failed(failure))
            }
            break
        }
        // A first download the cycle did not finish leaves no table without its uuid index.
        try? await store.finishInterruptedDownload()
        statusPublisher.send(.downloadEnded)
        return report
    }

    private func handle(_ failure: SyncFailure) async {
        statusPublisher.send(.cycleFailed(failure))
        switch failure {
        case .signInRequired:
            emit(.signInRequired)
        case .accessRevoked:
            emit(.accessRevoked)
        case .updateRequired:
            break
        case let failure where failure.isTransient:
            scheduleRetry(after: failure)
        default:
            break
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

    /// Pages read ahead during a first download, whose pages are stored
    /// several to a transaction (`DownloadBatch`): a batch's worth and the
    /// pages for the store's next wait, so the next batch is here when the
    /// store is done with this one.
    static let downloadPagesAhead = 8

    private func pullPages(_ generation: UInt64, _ report: inout SyncReport) async throws {
        let plan = try await scopePlan(generation)
        let cursor = try await store.pullState(collections: plan.collections).cursor
        // The device's own writes whose answers it holds stay on the server
        // (a store only ever holds more of them as the pull goes on).
        let own = try await store.ownAnswersHeld().flatMap { $0 > 0 ? (client: store.clientID, through: $0) : nil }
        // A first download (or one from scratch again) stores pages in
        // batches; later pulls are a page or two, stored as they come.
        let batching = cursor == nil
        var batch = DownloadBatch()
        // Pages are requested ahead while the store writes (see PullPageChain).
        let client = self.client
        let limit = options.pullPageSize
        var chain = PullPageChain(
            after: cursor, depth: batching ? Self.downloadPagesAhead : Self.pullPagesAhead,
            following: { $0.body.hasMore ? $0.body.cursor : nil }
        ) { cursor, early in
            try await client.pull(
                collections: plan.collections, cursor: cursor, limit: limit, windowStart: plan.windowStart, own: own, nextCursor: early)
        }
        defer { chain.cancel() }
        if cursor == nil {
            statusPublisher.send(.downloadStarted(total: plan.total))
            await publishStatus()
        }
        while true {
            guard schedule.isCurrent(generation) else { throw StaleGeneration() }
            let page: RawPullPage
            do {
                guard let answer = try await chain.next() else {
                    _ = try await storePages(batch.take(), plan, generation, &report)
                    return
                }
                page = answer.body
                await record(.answered(latency: answer.latency))
            } catch let failure as ServerClient.Failure {
                await record(failure)
                // Pages already here are kept: the next cycle goes on after them.
                _ = try await storePages(batch.take(), plan, generation, &report)
                throw failure.failure
            }
            batch.add(page)
            guard !batching || batch.isDue(nextIsHere: chain.nextIsHere) else { continue }
            if try await storePages(batch.take(), plan, generation, &report) { return }
            // Between pages only the progress moves; the store-wide counts
            // (a COUNT over every table) wait for the end of the cycle.
            publishProgress()
        }
    }

    /// Stores pages of a pull with the last one's cursor, in one
    /// transaction; true once the last page of the pull is in.
    private func storePages(
        _ pages: [RawPullPage], _ plan: ScopePlan, _ generation: UInt64, _ report: inout SyncReport
    ) async throws -> Bool {
        guard let last = pages.last else { return false }
        // A slow answer from before a newer cycle never overwrites fresher data.
        guard schedule.isCurrent(generation) else { throw StaleGeneration() }
        let result = try await store.applyPulls(pages, collections: plan.collections)
        for page in pages { liveChannel.stored(page) }
        report.add(result)
        // The pages queued deletes of records that came back, or freed
        // changes held behind a refused create: they go out next.
        if result.redeleted + result.unblocked > 0, schedule.followUp == nil { schedule.requestFollowUp(.localChange) }
        statusPublisher.send(.downloaded(rows: Int64(result.applied + result.keptLocal)))
        if !last.hasMore {
            statusPublisher.send(.downloadFinished)
            return true
        }
        return false
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
}

