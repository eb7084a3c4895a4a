// Captures typed records with dates on one device, syncs them through a
// real `outpost serve`, reads them on a second device in a live query, and
// checks every value came back identical.
//
//   swift run FieldNotes <server-url> <token>
import Foundation
import Outpost
import OutpostTesting

struct Person: SyncRecord, Equatable {
    static let collection = "people"
    static let indexedFields = ["name"]
    var name: String
    var phone: String?
    var section: Int?
    var createdAt: Date
}

struct Visit: SyncRecord, Equatable {
    static let collection = "visits"
    static let references = ["person": "people"]
    var person: RecordLink<Person>
    var visitedAt: Date
    var notes: String?
}

enum Check: Error, CustomStringConvertible {
    case failed(String)
    var description: String { if case .failed(let text) = self { return text } else { return "" } }
}

/// A date to the microsecond, as the wire keeps it.
func microseconds(_ date: Date) -> Date {
    Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1_000_000).rounded() / 1_000_000)
}

@MainActor
func run(server: URL, token: String) async throws {
    let folder = try TemporaryDirectory(prefix: "field-notes")
    let collections = [Person.descriptor, Visit.descriptor]
    let phone = try LocalStore(path: folder.path("phone.sqlite"), collections: collections)
    let office = try LocalStore(path: folder.path("office.sqlite"), collections: collections)
    var options = SyncOptions()
    options.periodicInterval = nil
    options.schemaVersion = 1
    options.clientName = "org.example.fieldnotes/1.0"
    let phoneSync = SyncEngine(store: phone, transport: URLSessionTransport(baseURL: server), options: options) { _ in token }
    let officeSync = SyncEngine(store: office, transport: URLSessionTransport(baseURL: server), options: options) { _ in token }

    // The office watches its list before anything arrives.
    let people = await LiveQuery.records(Person.self, in: office, orderBy: [.ascending(\.name)])
    guard people.value.isEmpty else { throw Check.failed("a fresh store shows no people") }

    let ana = Person(name: "Ana Lima", phone: "555-0101", section: 4, createdAt: microseconds(Date(timeIntervalSinceNow: -3_600)))
    let anaID = try await phone.create(ana)
    let visit = Visit(person: RecordLink(anaID), visitedAt: microseconds(Date()), notes: "Primeira visita — ok ✓")
    let visitID = try await phone.create(visit)
    try await phoneSync.sync(timeout: .seconds(30))
    try await officeSync.sync(timeout: .seconds(30))

    // The live query saw the pull's commit.
    let deadline = Date().addingTimeInterval(10)
    while people.value.count < 1 {
        guard Date() < deadline else { throw Check.failed("the live query never showed the synced person") }
        try await Task.sleep(for: .milliseconds(10))
    }
    guard let seen = people.value.first, seen.value == ana, seen.id == anaID else {
        throw Check.failed("the person read back differs: \(String(describing: people.value.first?.value)) vs \(ana)")
    }
    guard let seenVisit = try await office.get(Visit.self, visitID), seenVisit.value == visit else {
        throw Check.failed("the visit read back differs")
    }
    guard seen.deviceTime != nil, seen.serverUpdatedAt != nil else { throw Check.failed("captured-at and received-at are both known") }
    await phoneSync.stop()
    await officeSync.stop()
    print("FieldNotes: a person and a visit with dates went through \(server) and read back identical on another device.")
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: FieldNotes <server-url> <token>\n".utf8))
    exit(2)
}
do {
    try await run(server: url, token: arguments[2])
} catch {
    FileHandle.standardError.write(Data("FieldNotes: \(error)\n".utf8))
    exit(1)
}
