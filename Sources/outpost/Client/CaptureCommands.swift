import Foundation
import Outpost
import OutpostCore
import OutpostSQLite

/// `add`, `edit`, `delete`, `list`: capture and browse, online or not.
enum CaptureCommands {
    static let help = """
        Usage: outpost add <collection> field=value … [--profile NAME]
               outpost edit <uuid> field=value … [--profile NAME]
               outpost delete <uuid> [--profile NAME]
               outpost list [collection] [--limit N] [--profile NAME]
               outpost get-blob <sha256> [--output FILE] [--profile NAME]

        Works with no network: changes are kept on this computer and sent by 'outpost sync'.
        field=value sets text; field:=JSON sets a number, true/false, null or other JSON
        (e.g. section:=3). In edit, field:=null clears a field.
        field=@FILE attaches a file (a photo): it is copied into this computer's store and
        uploaded before the record by 'outpost sync' (e.g. photo=@./door.jpg).
        list shows the newest N records of each collection (50 by default; it says when it
        left some out) and each attachment's state; get-blob writes an attachment's bytes to
        standard output (or FILE), downloading them if they are not on this computer (the
        first 12 digits list prints are enough for one on this computer).
        """

    /// A `field=@FILE` word: the file to attach to the field.
    struct FileField {
        var field: String
        var file: URL
    }

    /// `fields`, with `field=@FILE` words apart: their files are attached
    /// in the transaction that writes the record.
    static func fieldsAndFiles(_ words: ArraySlice<String>) throws -> (JSONObject, [FileField]) {
        var files: [FileField] = []
        var plain: [String] = []
        for word in words {
            if word.range(of: ":=") == nil, let equals = word.firstIndex(of: "="), word[word.index(after: equals)...].hasPrefix("@") {
                let name = String(word[..<equals])
                let path = String(word[word.index(equals, offsetBy: 2)...])
                guard !name.isEmpty else { throw UsageError("'\(word)' has no field name before '='.") }
                guard !path.isEmpty else { throw UsageError("Name the file to attach after '@', e.g. \(name)=@./photo.jpg.") }
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                    throw UsageError("There is no file \(path) to attach to \(name).")
                }
                files.append(FileField(field: name, file: URL(fileURLWithPath: path)))
            } else {
                plain.append(word)
            }
        }
        return (try fields(plain[...]), files)
    }

    /// Parses `field=value` (text) and `field:=json` words into a patch.
    static func fields(_ words: ArraySlice<String>) throws -> JSONObject {
        var object: JSONObject = [:]
        for word in words {
            if let range = word.range(of: ":=") {
                let name = String(word[..<range.lowerBound])
                guard !name.isEmpty else { throw UsageError("'\(word)' has no field name before ':='.") }
                do {
                    object[name] = try JSONValue.parse(String(word[range.upperBound...]))
                } catch {
                    throw UsageError("The value of \(name) after ':=' is not valid JSON.")
                }
            } else if let equals = word.firstIndex(of: "=") {
                let name = String(word[..<equals])
                guard !name.isEmpty else { throw UsageError("'\(word)' has no field name before '='.") }
                object[name] = .string(String(word[word.index(after: equals)...]))
            } else {
                throw UsageError("'\(word)' is not field=value or field:=JSON.")
            }
        }
        return object
    }

    static func add(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        try arguments.checkAllUsed()
        guard let collection = arguments.positional.first else {
            throw UsageError("Say what to add: outpost add <collection> field=value …")
        }
        let (data, files) = try fieldsAndFiles(arguments.positional.dropFirst())
        guard !data.isEmpty || !files.isEmpty else { throw UsageError("Give at least one field=value to add.") }
        _ = try profile.loadAccount()
        try await profile.withStore { store in
            // The files and the record are written together: a failure keeps neither.
            let uuid = try await store.write { transaction in
                var data = data
                for file in files { data[file.field] = try transaction.attach(contentsOf: file.file).jsonValue }
                return try transaction.create(in: collection, data)
            }
            print(uuid.wireText)
        }
    }

    static func edit(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        try arguments.checkAllUsed()
        guard let uuidText = arguments.positional.first else { throw UsageError("Say which record: outpost edit <uuid> field=value …") }
        guard let uuid = UUID.fromWire(uuidText) else { throw UsageError("'\(uuidText)' is not a record id (a UUID).") }
        let (patch, files) = try fieldsAndFiles(arguments.positional.dropFirst())
        guard !patch.isEmpty || !files.isEmpty else { throw UsageError("Give at least one field=value to change.") }
        _ = try profile.loadAccount()
        try await profile.withStore { store in
            let collection = try await locate(uuid, in: store, among: profile.collections.map(\.name))
            try await store.write { transaction in
                var patch = patch
                for file in files { patch[file.field] = try transaction.attach(contentsOf: file.file).jsonValue }
                try transaction.update(in: collection, uuid, patch: patch)
            }
            print("Changed \(collection) record \(uuid.wireText); it will be sent with the next sync.")
        }
    }

    static func delete(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        try arguments.checkAllUsed()
        guard let uuidText = arguments.positional.first, arguments.positional.count == 1 else {
            throw UsageError("Say which one record: outpost delete <uuid>")
        }
        guard let uuid = UUID.fromWire(uuidText) else { throw UsageError("'\(uuidText)' is not a record id (a UUID).") }
        _ = try profile.loadAccount()
        try await profile.withStore { store in
            let collection = try await locate(uuid, in: store, among: profile.collections.map(\.name))
            try await store.delete(in: collection, uuid)
            print("Deleted \(collection) record \(uuid.wireText).")
        }
    }

    static func locate(_ uuid: UUID, in store: LocalStore, among collections: [String]) async throws -> String {
        for name in collections where try await store.get(in: name, uuid) != nil {
            return name
        }
        throw CommandFailure("No record \(uuid.wireText) on this computer.")
    }

    static func list(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        let limit = try arguments.integer("limit", in: 1...100_000) ?? 50
        try arguments.checkAllUsed()
        guard arguments.positional.count <= 1 else { throw UsageError("list takes at most one collection.") }
        _ = try profile.loadAccount()
        try await profile.withStore { store in
            let names = arguments.positional.first.map { [$0] } ?? profile.collections.map(\.name)
            let now = Date()
            var shown = 0
            let counts = try await store.localCounts()
            for name in names {
                let records = try await store.query(RecordQuery(name, order: [.localUpdatedAt()], limit: limit))
                // A cut list says so: the newest `limit` of how many, and how to see the rest.
                defer {
                    if let total = counts[name], total > records.count {
                        print("… \(records.count) of \(total) \(name) records shown (the newest); --limit \(total) shows them all.")
                    }
                }
                for record in records {
                    let age = record.localUpdatedAt ?? record.serverUpdatedAt?.date
                    let attachments = AttachedFile.all(in: record.value)
                    var summary = record.value.keys.sorted().filter { attachments[$0] == nil }.prefix(4).compactMap { key -> String? in
                        guard let value = record.value[key] else { return nil }
                        let text = value.stringValue ?? (try? value.jsonText()) ?? ""
                        return "\(key)=\(text.count > 28 ? String(text.prefix(27)) + "…" : text)"
                    }.joined(separator: " ")
                    for (field, attachment) in attachments.sorted(by: { $0.key < $1.key }) {
                        let state = (try? await store.attachmentState(attachment))?.description ?? "unknown"
                        summary += " \(field)=[\(attachment.contentType), \(attachment.size) bytes, \(attachment.sha256.prefix(12)): \(state)]"
                    }
                    print(
                        "\(record.uuid.wireText)  \(name.padding(toLength: 7, withPad: " ", startingAt: 0))  \(record.syncState.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0))  \(Age.describe(age, now: now).padding(toLength: 12, withPad: " ", startingAt: 0))  \(summary)"
                    )
                    shown += 1
                }
            }
            if shown == 0 { print("No records on this computer yet.") }
        }
    }
}

extension CaptureCommands {
    /// `get-blob SHA256`: an attachment's bytes, from this computer or the server.
    static func getBlob(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        let output = arguments.option("output")
        try arguments.checkAllUsed()
        guard let given = arguments.positional.first?.lowercased(), arguments.positional.count == 1 else {
            throw UsageError("Say which attachment: outpost get-blob <sha256>")
        }
        // The whole SHA-256, or the start of one that `list` prints (at least 8 digits).
        let isHex = given.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        guard isHex, (8...64).contains(given.utf8.count) else {
            throw UsageError("'\(given)' is not a SHA-256: 64 hexadecimal digits (or the first 8 or more of them).")
        }
        let account = try profile.loadAccount()
        try await profile.withStore { store in
            let engine = try profile.engine(store: store, account: account, timeout: 30)
            // The record naming it says its size; else the server does.
            var matching: [String: AttachedFile] = [:]
            for name in profile.collections.map(\.name) {
                for record in try await store.query(RecordQuery(name)) {
                    for file in AttachedFile.all(in: record.value).values where file.sha256.hasPrefix(given) {
                        matching[file.sha256] = file
                    }
                }
            }
            guard matching.count <= 1 else {
                throw UsageError(
                    "'\(given)' starts \(matching.count) attachments on this computer; give more digits: "
                        + matching.keys.sorted().map { String($0.prefix(16)) + "…" }.joined(separator: ", "))
            }
            let known = matching.values.first
            guard let sha = known?.sha256 ?? (AttachedFile.isBlobName(given) ? given : nil) else {
                throw CommandFailure(
                    "No attachment on this computer starts with \(given); give all 64 digits to ask the server for it.")
            }
            let attachment: AttachedFile
            if let known {
                attachment = known
            } else {
                do {
                    attachment = try await engine.describeBlob(sha)
                } catch let failure as SyncFailure {
                    throw CommandFailure("The attachment \(sha.prefix(12))… could not be had: \(SyncCommands.describe(failure)).")
                }
            }
            let data: Data
            do {
                data = try await engine.attachmentData(attachment).data
            } catch let failure as SyncFailure {
                throw CommandFailure("The attachment \(sha.prefix(12))… could not be downloaded: \(SyncCommands.describe(failure)).")
            }
            if let output {
                // Whole or not at all, and on the disk when this says it wrote it.
                do {
                    try DurableFiles.write(data, to: output, permissions: 0o644)
                } catch {
                    throw CommandFailure("Could not write \(output): \(error).")
                }
                FileHandle.standardError.write(Data("Wrote \(data.count) bytes (\(attachment.contentType)) to \(output).\n".utf8))
            } else {
                FileHandle.standardOutput.write(data)
            }
        }
    }
}

/// "3 min ago", "2 days ago": how old a record or a sync is.
enum Age {
    static func describe(_ date: Date?, now: Date) -> String {
        guard let date else { return "unknown age" }
        let seconds = now.timeIntervalSince(date)
        switch seconds {
        case ..<0: return "just now"
        case ..<60: return "just now"
        case ..<3600: return "\(Int(seconds / 60)) min ago"
        case ..<86_400: return "\(Int(seconds / 3600)) h ago"
        default: return "\(Int(seconds / 86_400)) days ago"
        }
    }
}
