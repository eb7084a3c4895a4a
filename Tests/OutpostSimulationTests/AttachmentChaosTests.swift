import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting
import Testing

/// A visit with its photo, for the tests over real sockets.
struct ChaosVisit: SyncRecord, Equatable {
    static let collection = "visits"
    static let references = ["person": "people"]
    var person: String
    var visitedAt: String
    var photo: OutpostCore.AttachedFile?

    enum CodingKeys: String, CodingKey {
        case person, photo
        case visitedAt = "visited_at"
    }
}

/// A live server (libmicrohttpd streaming uploads to files) behind the chaos proxy.
final class BlobNetwork: Sendable {
    let directory: TemporaryDirectory
    let server: SyncServer
    let http: HTTPServer
    let proxy: ChaosProxy

    init() throws {
        directory = try TemporaryDirectory(prefix: "outpost-blobs")
        server = try SyncServer(database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
        http = try HTTPServer(port: 0, threads: 4, server: server)
        proxy = try ChaosProxy(upstreamPort: http.port)
    }

    func stop() {
        proxy.stop()
        http.stop()
    }

    /// A device through the proxy, or (`direct`) straight to the server.
    func device(_ name: String, user: String = "u-1", role: Role = .field, direct: Bool = false) throws -> (store: LocalStore, engine: SyncEngine) {
        let store = try LocalStore(
            path: directory.path("\(name).sqlite"), collections: [ChaosPerson.descriptor, ChaosVisit.descriptor])
        var options = SyncOptions()
        options.periodicInterval = nil
        options.liveUpdates = false
        // Generous: a full test run keeps both cores busy.
        options.requestTimeout = 30
        let engine = SyncEngine(
            store: store, transport: URLSessionTransport(baseURL: direct ? URL(string: "http://127.0.0.1:\(http.port)")! : proxy.url),
            token: try server.tokens.issue(user: user, role: role, team: "t-1", ttl: nil), options: options,
            clock: ChaosTestClock())
        return (store, engine)
    }

    /// What the server holds of a blob.
    func blob(_ sha: String) throws -> (received: Int64, complete: Bool)? {
        try server.database.read { sql in
            try sql.first("SELECT received, complete FROM blobs WHERE sha256 = ?", [.text(sha)]).map { (Int64($0.int(0)), $0.bool(1)) }
        }
    }

    /// The bytes the server stored for a blob, read from its file.
    func storedBytes(_ sha: String) -> Data? {
        FileManager.default.contents(atPath: directory.path("server.sqlite.blobs/\(sha)"))
    }
}

func seededBytes(_ count: Int, seed: UInt64) -> Data {
    var random = SeededRandom(seed: seed)
    return Data(random.bytes(count))
}

@Suite("Attachments through real faults", .timeLimit(.minutes(5)))
struct AttachmentChaosTests {
    @Test(arguments: [UInt64(1), 2, 3])
    func anUploadCutAtRandomOffsetsResumesAndCompletesWithNoByteSentTwice(seed: UInt64) async throws {
        let network = try BlobNetwork()
        defer { network.stop() }
        let device = try network.device("field")
        let bytes = seededBytes(4_000_000, seed: seed)
        let photo = try await device.store.attach(bytes, contentType: "image/jpeg")
        let person = try await device.store.create(ChaosPerson(name: "Romero"))
        let visit = try await device.store.create(ChaosVisit(person: person.wireText, visitedAt: "2026-11-29T10:00:00Z", photo: photo))
        var random = SeededRandom(seed: seed)
        var attempts = 0
        // Each connection is cut after a random number of bytes, until the upload is through.
        while try network.blob(photo.sha256)?.complete != true {
            attempts += 1
            let held = try network.blob(photo.sha256)
            try #require(attempts <= 60, "the upload never completed: \(String(describing: held))")
            network.proxy.mode = .cutAfterClientBytes(Int(random.next() % 600_000) + 100_000)
            _ = try? await device.engine.sync(timeout: .seconds(30))
        }
        let cuts = network.proxy.cuts
        network.proxy.mode = .pass
        try await device.engine.sync(timeout: .seconds(30))
        #expect(cuts >= 3, "the proxy cut the upload several times (\(cuts))")
        #expect(network.storedBytes(photo.sha256) == bytes, "the server holds exactly the photo")
        #expect(try await device.store.get(ChaosVisit.self, visit)?.syncState == .synced)
        #expect(try await device.store.attachmentState(photo) == .onDevice)
        // The server stored every byte once: each resumed upload started
        // exactly where its copy ended. (What a cut destroys in the sockets
        // is sent again; that is what the proxy saw beyond the photo.)
        #expect(network.server.metrics.blobBytesReceivedTotal == UInt64(bytes.count), "bytes the server took twice")
        let lostInFlight = network.proxy.bytesToServer - bytes.count
        #expect(lostInFlight < cuts * 2_500_000, "bytes lost in flight: \(lostInFlight) over \(cuts) cuts")
        let results = network.server.metrics.blobUploadResults
        #expect(results["hash_mismatch"] == nil, "no byte stored at the wrong offset: \(results)")
    }

    @Test func aCoordinatorReadsTheTeamsPhotoAndAnotherFieldUserCannot() async throws {
        let network = try BlobNetwork()
        defer { network.stop() }
        // Over real sockets, with no proxy between: this is about who may read.
        let field = try network.device("field", user: "u-1", direct: true)
        let bytes = seededBytes(400_000, seed: 9)
        let photo = try await field.store.attach(bytes, contentType: "image/jpeg")
        let person = try await field.store.create(ChaosPerson(name: "Romero"))
        _ = try await field.store.create(ChaosVisit(person: person.wireText, visitedAt: "2026-11-29T10:00:00Z", photo: photo))
        try await field.engine.sync(timeout: .seconds(30))

        let coordinator = try network.device("coordinator", user: "c-1", role: .coordinator, direct: true)
        try await coordinator.engine.sync(timeout: .seconds(30))
        #expect(try await coordinator.engine.attachmentData(photo).data == bytes)

        let other = try network.device("other", user: "u-2", direct: true)
        await #expect(throws: SyncFailure.self) { try await other.engine.attachmentData(photo).data }
        #expect(try await other.store.attachmentState(photo) == .notDownloaded, "nothing kept of a refused read")
    }
}
