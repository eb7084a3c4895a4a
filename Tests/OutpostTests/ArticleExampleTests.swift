import Foundation
import Outpost
import OutpostServer
import OutpostTesting
import Testing

/// The documentation catalog's examples, compiled and run here against a
/// live server, so the articles cannot drift from the API. Each `swift`
/// block of an article (but the SwiftUI ones, which need Apple's SDK) must
/// appear line for line in this file.
enum ArticleExamples {
    struct Person: SyncRecord, Equatable {
        static let collection = "people"
        static let indexedFields = ["name"]
        var name: String
        var phone: String?
    }

    struct Visit: SyncRecord, Equatable {
        static let collection = "visits"
        static let references = ["person": "people"]
        var person: RecordLink<Person>
        var visitedAt: Date
        var notes: String?
        var photo: AttachedFile?
    }

    static func captureVisit(store: LocalStore, ana: UUID, doorPhoto: URL) async throws -> UUID {
        let visit = try await store.write { transaction in
            let attached = try transaction.attach(contentsOf: doorPhoto)
            return try transaction.create(Visit(person: RecordLink(ana), visitedAt: Date(), photo: attached))
        }
        return visit
    }

    static func attachmentLine(engine: SyncEngine) async -> String? {
        let line = StatusMessage.attachmentText(for: await engine.currentStatus)
        return line
    }

    static func photoData(of visit: Visit, store: LocalStore) async throws -> Data? {
        guard let photo = visit.photo else { return nil }
        let download = store.attachmentData(photo)
        for try await step in download { print("\(Int(step.fraction * 100)) %") }
        return try await download.data
    }

    /// The own-tables article's record types: a mapped table's columns as
    /// properties (compiled here; the article's tables need PostgreSQL).
    struct Vehicle: SyncRecord {
        static let collection = "vehicles"
        var name: String
        var plate: String?
        var odometerKm: Int?
        var createdAt: Date?
    }

    struct FuelLog: SyncRecord {
        static let collection = "fuel_logs"
        static let references = ["vehicle_id": "vehicles"]
        var vehicleId: RecordLink<Vehicle>
        var liters: Decimal
        var pricePerLiter: Decimal
        var totalCost: Decimal?   // read-only: the table's trigger computes it
        var odometerKm: Int?
        var filledAt: Date
        var note: String?
    }

    /// Stands for the app's own sign-in.
    struct SignIn: Sendable {
        let token: String
        func currentToken(refresh: Bool = false) async throws -> String { token }
    }

    static func overview(databasePath: String, serverURL: URL, signIn: SignIn) async throws -> SyncEngine {
        let store = try LocalStore(path: databasePath, collections: [Person.descriptor])
        let ana = try await store.create(Person(name: "Ana"))
        let engine = SyncEngine(store: store, transport: HTTPTransport.make(baseURL: serverURL)) { _ in
            try await signIn.currentToken()
        }
        await engine.start()
        _ = ana
        return engine
    }

    static func gettingStarted(databasePath: String, serverURL: URL, signIn: SignIn) async throws -> (LocalStore, SyncEngine, SyncReport) {
        let store = try LocalStore(path: databasePath, collections: [Person.descriptor, Visit.descriptor])
        let ana = try await store.create(Person(name: "Ana"))
        try await store.update(Person.self, ana) { $0.phone = "555" }
        try await store.write { tx in
            let bruno = try tx.create(Person(name: "Bruno"))
            try tx.create(Visit(person: RecordLink(bruno), visitedAt: Date(), notes: "first visit"))
        }
        let people = try await store.query(Person.self, orderBy: [.ascending(\.name)])
        #expect(people.map(\.value.name) == ["Ana", "Bruno"])
        let recent = try await store.query(
            Visit.self, where: .greaterThan(\.visitedAt, Date().addingTimeInterval(-86_400)) && .isNil(\.notes),
            orderBy: [.descending(\.visitedAt)], limit: 20)
        #expect(recent.isEmpty, "the one visit has notes")

        // URLSessionTransport on Apple platforms, CurlTransport (libcurl) on Linux.
        let transport = HTTPTransport.make(baseURL: serverURL)
        let engine = SyncEngine(store: store, transport: transport) { request in
            try await signIn.currentToken(refresh: request != .start)
        }
        await engine.start()
        let report = try await engine.sync()   // at most 60 s by default; sync(timeout:) to choose
        return (store, engine, report)
    }

    @MainActor
    static func syncStatus(store: LocalStore, engine: SyncEngine) async throws -> String {
        let people = await LiveQuery.records(Person.self, in: store, orderBy: [.ascending(\.name)])
        let waiting = await LiveQuery.count(Person.self, in: store, where: .syncState(.pending))
        let refused = await LiveQuery.rejected(in: store)
        #expect(people.value.map(\.value.name) == ["Ana", "Bruno"])
        #expect(waiting.value == 0, "everything was sent")
        #expect(refused.value.isEmpty)
        let status = await engine.currentStatus
        let sentence = StatusMessage.text(for: status, locale: Locale(identifier: "it_IT"))
        #expect(sentence != StatusMessage.text(for: status, locale: Locale(identifier: "en")), "the sentence is Italian")
        await sceneChanged(to: false, engine: engine)
        #expect(await engine.currentStatus.live == .off, "no channel in the background")
        await sceneChanged(to: true, engine: engine)
        #expect(!StatusMessage.liveText(for: await engine.currentStatus).isEmpty)
        return sentence
    }

    static func conflictsAndRejections(store: LocalStore) async throws {
        for record in try await store.rejectedRecords() {
            let problems = record.rejection?.errors ?? [:]
            print(record.uuid, problems)
        }
        for conflict in try await store.conflicts() {
            if let lost = conflict.localChange, conflict.serverRecord != nil {
                try await store.update(in: conflict.record.collection, conflict.record.uuid, patch: lost)
            }
            try await store.dismissConflict(conflict.id)
        }
        for conflict in try await store.conflicts() where !conflict.fields.isEmpty {
            // Keep the person's own value of every field they did not give up.
            let mine = Set(conflict.localChange?.keys.map { $0 } ?? []).subtracting(["status"])
            try await store.resolveConflict(conflict.id, keepingMine: mine)
        }
    }

    static func testing(serverURL: URL, token: String) async throws -> SyncFailure? {
        let directory = try TemporaryDirectory()
        let clock = ManualWallClock()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: [Person.descriptor], clock: clock)
        let network = FaultInjectingTransport(wrapping: URLSessionTransport(baseURL: serverURL))
        var options = SyncOptions()
        options.periodicInterval = nil
        let engine = SyncEngine(store: store, transport: network, token: token, options: options)
        try await store.create(Person(name: "Ana"))
        network.inject(.dropResponse) { $0.target.hasPrefix("/v1/push") }
        let lost = try? await engine.sync()
        #expect(lost == nil, "the answer was dropped: the sync failed")
        let report = try await engine.sync()
        await engine.stop()
        return report.failure
    }

    static func security(databasePath: String) async throws -> LocalStore {
        let keyBytes = [UInt8](repeating: 7, count: 32)
        let cipher = try AESGCMCipher(key: keyBytes)
        let sealed = try LocalStore(path: databasePath, collections: [Person.descriptor], cipher: cipher)
        return sealed
    }

    static func appGroup(appGroupFolder: URL, cipher: AESGCMCipher) async throws -> LocalStore {
        // The App Group's folder, from FileManager's containerURL(forSecurityApplicationGroupIdentifier:).
        let path = appGroupFolder.appendingPathComponent("outpost.sqlite").path
        let shared = try await LocalStore.open(
            path: path, collections: [Person.descriptor], protection: .untilFirstUnlock, cipher: cipher,
            busyTimeout: .seconds(2))
        return shared
    }

    static func durability(cachePath: String) throws -> LocalStore {
        // Survives the app being killed, not the power going: the last writes may
        // be lost (never the file). Never for what a person typed or photographed.
        let cache = try LocalStore(path: cachePath, collections: [Person.descriptor], durability: .processCrash)
        return cache
    }
}

@Suite("Documentation articles", .timeLimit(.minutes(3)))
struct ArticleExampleTests {
    /// The Security article's crash-only store works as a store.
    @Test func theCrashOnlyStoreOfTheSecurityArticleWritesAndReads() async throws {
        let directory = try TemporaryDirectory()
        let cache = try ArticleExamples.durability(cachePath: directory.path("cache.sqlite"))
        let id = try await cache.create(Person(name: "Ana"))
        #expect(try await cache.get(Person.self, id)?.value.name == "Ana")
        await cache.close()
    }

    @Test func theArticlesExamplesRunAgainstALiveServer() async throws {
        let directory = try TemporaryDirectory()
        let server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
        let http = try HTTPServer(port: 0, threads: 2, server: server)
        defer { http.stop() }
        let url = URL(string: "http://127.0.0.1:\(http.port)")!
        try await waitUntilServing(url)
        let signIn = ArticleExamples.SignIn(token: try server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil))

        let other = ArticleExamples.SignIn(token: try server.tokens.issue(user: "caio", role: .field, team: "north", ttl: nil))
        let first = try await ArticleExamples.overview(databasePath: directory.path("overview.sqlite"), serverURL: url, signIn: other)
        await first.stop()
        let (store, engine, report) = try await ArticleExamples.gettingStarted(
            databasePath: directory.path("device.sqlite"), serverURL: url, signIn: signIn)
        #expect(report.failure == nil)
        let rows = try server.database.read { try $0.query("SELECT data FROM records WHERE collection = 'visits'", []) }
        #expect(rows.first?.string(0).contains("visited_at") == true, "the visit arrived with its date as a field")
        let sentence = try await ArticleExamples.syncStatus(store: store, engine: engine)
        #expect(!sentence.isEmpty)
        try await ArticleExamples.conflictsAndRejections(store: store)
        let door = URL(fileURLWithPath: directory.path("door.jpg"))
        try Data(repeating: 0x42, count: 120_000).write(to: door)
        let person = try #require(try await store.query(ArticleExamples.Person.self).first?.uuid)
        let visit = try await ArticleExamples.captureVisit(store: store, ana: person, doorPhoto: door)
        try await engine.sync()
        #expect(await ArticleExamples.attachmentLine(engine: engine) == nil, "nothing waits once uploaded")
        let captured = try #require(try await store.get(ArticleExamples.Visit.self, visit))
        #expect(try await ArticleExamples.photoData(of: captured.value, store: store) == Data(repeating: 0x42, count: 120_000))
        await engine.stop()
        #expect(try await ArticleExamples.testing(serverURL: url, token: signIn.token) == nil)
        let sealed = try await ArticleExamples.security(databasePath: directory.path("sealed.sqlite"))
        await sealed.close()
        let shared = try await ArticleExamples.appGroup(
            appGroupFolder: directory.url, cipher: try AESGCMCipher(key: [UInt8](repeating: 7, count: 32)))
        await shared.close()
    }

    /// Every line of every article's `swift` blocks (but SwiftUI ones) is in this file.
    @Test func theArticlesShowThisCode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let catalog = root.appendingPathComponent("Sources/Outpost/Outpost.docc")
        let articles = try FileManager.default.contentsOfDirectory(atPath: catalog.path).filter { $0.hasSuffix(".md") }
        #expect(articles.count >= 6, "the landing page and the five articles")
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let sourceLines = Set(source.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        // The background article's code needs Apple's BackgroundTasks: it is the examples target's, type-checked for iOS.
        let examples = root.appendingPathComponent("Sources/BackgroundSyncExamples")
        var exampleLines: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: examples.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: examples.appendingPathComponent(file), encoding: .utf8)
            exampleLines.formUnion(text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        }
        var checked = 0
        for article in articles {
            let known = article == "SyncingInTheBackground.md" ? exampleLines : sourceLines
            let text = try String(contentsOf: catalog.appendingPathComponent(article), encoding: .utf8)
            for block in text.components(separatedBy: "```swift\n").dropFirst() {
                let code = block.components(separatedBy: "```")[0]
                if code.contains("import SwiftUI") { continue }
                for line in code.split(separator: "\n") {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    checked += 1
                    #expect(trimmed.isEmpty || known.contains(trimmed), "\(article): not in the compiled examples: \(trimmed)")
                }
            }
        }
        #expect(checked > 40)
    }
}

/// The live-updates article's scene-phase hook, as written there.
func sceneChanged(to active: Bool, engine: SyncEngine) async {
    if active { await engine.enteredForeground() } else { await engine.enteredBackground() }
}
