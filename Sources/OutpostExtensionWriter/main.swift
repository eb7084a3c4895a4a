// A second process on one store file, as an app's share extension or
// widget is: it opens the store the app has open (opening and migrating
// beside the app), captures records and exits. It runs no sync engine: the
// app's engine pushes what it captured.
//
// Usage: OutpostExtensionWriter <database path> <captures> <name prefix>
// Lines: "R <client id>" the store is open, "C <uuid>" a capture committed,
//        "E" done and closed.
import Foundation
import Outpost
import OutpostCore

/// The tests' `people` collection, as the app registers it.
struct Person: SyncRecord {
    static let collection = "people"
    static let indexedFields = ["name"]
    var name: String
    var phone: String?
    var section: Int?
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let captures = Int(arguments[2]), captures >= 0 else {
    FileHandle.standardError.write(Data("usage: OutpostExtensionWriter <database path> <captures> <name prefix>\n".utf8))
    exit(2)
}

do {
    // An extension shares the file with a running app: it may wait for
    // the app's writes, never fail at once.
    let store = try await LocalStore.open(path: arguments[1], collections: [Person.descriptor], busyTimeout: .seconds(20))
    say("R \(store.clientID.wireText)")
    for index in 0..<captures {
        let uuid = try await store.create(Person(name: "\(arguments[3])-\(index)"))
        say("C \(uuid.wireText)")
    }
    await store.close()
    say("E")
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(1)
}
