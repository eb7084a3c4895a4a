import Foundation
import Outpost
import OutpostServer
import OutpostTesting
import Testing

/// The README's library example, compiled and run here against a live
/// server, so the documentation cannot drift from the API.
enum ReadmeExample {
    struct Person: SyncRecord {
        static let collection = "people"
        var name: String
        var phone: String?
    }

    struct Visit: SyncRecord {
        static let collection = "visits"
        static let references = ["person": "people"]   // children are sent after their parent
        var person: RecordLink<Person>
        var visitedAt: Date                              // the field "visited_at", RFC 3339 text on the wire
        var photo: AttachedFile?                         // bytes apart, uploaded before the visit
    }

    static func run(dbPath: String, serverURL: URL, token: String, doorJPEG: URL) async throws -> (SyncReport, SyncEngine) {
        // Open locally: works offline from the first line.
        let store = try LocalStore(path: dbPath, collections: [Person.descriptor, Visit.descriptor])
        let ana = try await store.create(Person(name: "Ana"))          // record + outbox entry, one transaction,
                                                                       // on disk when it returns (survives a power loss)
        try await store.update(Person.self, ana) { $0.phone = "555" }   // only changed fields are sent
        let photo = try await store.attach(contentsOf: doorJPEG)     // copied and hashed into the store
try await store.create(Visit(person: RecordLink(ana), visitedAt: Date(), photo: photo))

        // Connect separately; the app's sign-in gives tokens (asked at start and on 401, never offline).
        // URLSession on Apple platforms, libcurl on Linux (an idle live channel costs no CPU there).
        let engine = SyncEngine(store: store, transport: HTTPTransport.make(baseURL: serverURL)) { _ in token }
        await engine.start()                          // launch sync, periodic sync, reconnect handling
        let report = try await engine.sync(timeout: .seconds(60))   // pull-to-refresh; typed SyncFailure on error
        return (report, engine)
    }
}

@Suite("README", .timeLimit(.minutes(5)))
struct ReadmeExampleTests {
    @Test func theLibraryExampleRunsAgainstALiveServer() async throws {
        let directory = try TemporaryDirectory()
        let server = try SyncServer(
            database: try SQLiteServerDatabase(path: directory.path("server.sqlite")), config: ServerConfig())
        let http = try HTTPServer(port: 0, threads: 2, server: server)
        defer { http.stop() }
        let token = try server.tokens.issue(user: "ana", role: .field, team: "north", ttl: nil)
        try await waitUntilServing(URL(string: "http://127.0.0.1:\(http.port)")!)
        let door = URL(fileURLWithPath: directory.path("door.jpg"))
        try Data(repeating: 0xd8, count: 300_000).write(to: door)
        let (_, engine) = try await ReadmeExample.run(
            dbPath: directory.path("device.sqlite"), serverURL: URL(string: "http://127.0.0.1:\(http.port)")!, token: token,
            doorJPEG: door)
        await engine.waitForIdle()
        let people = try server.database.read { try $0.query("SELECT data FROM records WHERE collection = 'people'", []) }
        #expect(people.count == 1)
        #expect(people.first?.string(0).contains(#""phone":"555""#) == true, "the edit reached the server")
        let visits = try server.database.read { try $0.query("SELECT data FROM records WHERE collection = 'visits'", []) }
        #expect(visits.first?.string(0).contains(#""visited_at":"20"#) == true, "the visit's date arrived as RFC 3339 text")
        #expect(visits.first?.string(0).contains(#""content_type":"image/jpeg""#) == true, "the visit names its photo")
        let blobs = try server.database.read { try $0.query("SELECT complete FROM blobs", []) }
        #expect(blobs.count == 1 && blobs.first?.bool(0) == true, "the photo is on the server whole")
        await engine.stop()
    }

    /// Every line of the README's library example appears, as written, in this file.
    @Test func theReadmeShowsThisCode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "## The library"))
        let afterSection = readme[section.upperBound...]
        let start = try #require(afterSection.range(of: "```swift\n"))
        let end = try #require(afterSection[start.upperBound...].range(of: "```"))
        let example = afterSection[start.upperBound..<end.lowerBound]
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let sourceLines = Set(source.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        for line in example.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            #expect(trimmed.isEmpty || sourceLines.contains(trimmed), "README line not in the compiled example: \(trimmed)")
        }
    }
}
