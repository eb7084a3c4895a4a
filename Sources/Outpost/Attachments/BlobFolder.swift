import Foundation
import OutpostCore
import OutpostSQLite
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// The bytes of the store's attachments: one file per blob, named by its
/// SHA-256, in a folder beside the database (`<database>.blobs/`).
///
/// A file is written under a temporary name, flushed to the disk and only
/// then renamed to its hash, so a name always stands for complete bytes;
/// the row that makes it part of the store commits after that.
///
/// With a cipher, a file is a sequence of sealed pieces, each of
/// `pieceBytes` plaintext bytes prefixed by its index (so pieces cannot be
/// swapped or dropped unnoticed): any range is read by opening only the
/// pieces it covers.
final class BlobFolder: Sendable {
    let url: URL
    let cipher: (any PayloadCipher)?
    /// The store's protection class, given to the folder and every file in it.
    let protection: FileProtection
    /// Plaintext bytes per sealed piece, and per read while copying.
    static let pieceBytes = 1 << 20
    /// A piece's index, sealed with it.
    private static let indexBytes = 8

    /// What sealing adds to a piece (a nonce and a tag for AES-GCM): the
    /// same for every piece, so a piece's place in the file is computed.
    private let sealOverhead: Int

    init(databasePath: String, cipher: (any PayloadCipher)?, protection: FileProtection) {
        self.url = URL(fileURLWithPath: databasePath + ".blobs", isDirectory: true)
        self.cipher = cipher
        self.protection = protection
        self.sealOverhead = cipher.flatMap { try? $0.seal([]).count } ?? 0
        reprotectIfChanged()
    }

    /// A store reopened with another class (an app moving to `.complete`)
    /// gives it to the files already there. Only where the system reports a
    /// class: elsewhere there is nothing to compare, and nothing to change.
    private func reprotectIfChanged() {
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        guard let current = attributes?[.protectionKey] as? FileProtectionType, current.rawValue != protection.fileProtectionType.rawValue
        else { return }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        for name in names {
            try? FileManager.default.setAttributes(protection.fileAttributes, ofItemAtPath: url.appendingPathComponent(name).path)
        }
        try? FileManager.default.setAttributes(protection.fileAttributes, ofItemAtPath: url.path)
    }

    func path(_ sha: String) -> String { url.appendingPathComponent(sha).path }

    func holds(_ sha: String) -> Bool { FileManager.default.fileExists(atPath: path(sha)) }

    /// The blob names present, and the temporary files an interrupted copy left.
    func listing() -> (blobs: [String], leftovers: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return (names.filter(AttachedFile.isBlobName), names.filter { $0.hasPrefix(".incoming-") })
    }

    // MARK: Writing

    /// Copies bytes into the folder, hashing them on the way: `next` fills
    /// its buffer with up to `pieceBytes` bytes and returns how many, 0 at the end.
    func store(_ next: (inout [UInt8]) throws -> Int) throws -> (sha: String, size: Int64) {
        do {
            // The folder's own name must survive too, or a synced file in it is lost with it.
            if !FileManager.default.fileExists(atPath: url.path) {
                try DurableFiles.createDirectory(url.path)
                // Files created in the folder inherit its class on iOS; each file asks too.
                try FileManager.default.setAttributes(protection.fileAttributes, ofItemAtPath: url.path)
            }
        } catch {
            throw Self.storageError(error)
        }
        let temporary = url.appendingPathComponent(".incoming-\(UUID().uuidString.lowercased())")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil, attributes: protection.fileAttributes) else {
            throw StoreError.ioFailure("cannot create \(temporary.path)")
        }
        var keep = false
        defer { if !keep { try? FileManager.default.removeItem(at: temporary) } }
        let handle = try FileHandle(forWritingTo: temporary)
        var hash = SHA256()
        var size: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: Self.pieceBytes)
        var index: UInt64 = 0
        do {
            defer { try? handle.close() }
            while true {
                let count = try next(&buffer)
                guard count > 0 else { break }
                let piece = buffer[0..<count]
                piece.withUnsafeBytes { hash.update($0) }
                try handle.write(contentsOf: try sealed(piece, index: index))
                size += Int64(count)
                index += 1
            }
            try DurableFiles.sync(descriptor: handle.fileDescriptor, path: temporary.path)
        } catch let error as StoreError {
            throw error
        } catch {
            throw Self.storageError(error)
        }
        let sha = hash.finishHex()
        let destination = url.appendingPathComponent(sha)
        if FileManager.default.fileExists(atPath: destination.path) {
            // The same bytes are there already (content-addressed): keep those.
            return (sha, size)
        }
        do {
            // Renamed, then the folder synced: the row that will name the
            // file commits only once the file is there to stay.
            try DurableFiles.rename(temporary.path, to: destination.path)
        } catch {
            throw Self.storageError(error)
        }
        keep = true
        return (sha, size)
    }

    /// Stores bytes held in memory.
    func store(_ data: Data) throws -> (sha: String, size: Int64) {
        var offset = 0
        return try store { buffer in
            let count = min(Self.pieceBytes, data.count - offset)
            guard count > 0 else { return 0 }
            data.copyBytes(to: &buffer, from: (data.startIndex + offset)..<(data.startIndex + offset + count))
            offset += count
            return count
        }
    }

    /// Stores a copy of a file, read piece by piece (a 50 MiB video is never whole in memory).
    func store(contentsOf file: URL) throws -> (sha: String, size: Int64) {
        let source: FileHandle
        do {
            source = try FileHandle(forReadingFrom: file)
        } catch {
            throw StoreError.attachmentUnreadable("\(file.path) cannot be read: \(error.localizedDescription)")
        }
        defer { try? source.close() }
        return try store { buffer in
            let data: Data?
            do {
                data = try source.read(upToCount: Self.pieceBytes)
            } catch {
                throw StoreError.attachmentUnreadable("\(file.path) could not be read to the end: \(error.localizedDescription)")
            }
            guard let data, !data.isEmpty else { return 0 }
            data.copyBytes(to: &buffer, count: data.count)
            return data.count
        }
    }

    private func sealed(_ piece: ArraySlice<UInt8>, index: UInt64) throws -> Data {
        guard let cipher else { return Data(piece) }
        var plain = [UInt8]()
        plain.reserveCapacity(Self.indexBytes + piece.count)
        withUnsafeBytes(of: index.bigEndian) { plain.append(contentsOf: $0) }
        plain.append(contentsOf: piece)
        return Data(try cipher.seal(plain))
    }

    // MARK: Reading

    /// `count` bytes of the blob from `offset` (fewer at its end).
    func read(_ sha: String, size: Int64, from offset: Int64, count: Int) throws -> Data {
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: url.appendingPathComponent(sha))
        } catch {
            throw StoreError.attachmentNotOnDevice(sha)
        }
        defer { try? handle.close() }
        let end = min(size, offset + Int64(count))
        guard offset < end else { return Data() }
        do {
            guard let cipher else {
                try handle.seek(toOffset: UInt64(offset))
                let data = try handle.read(upToCount: Int(end - offset)) ?? Data()
                guard data.count == Int(end - offset) else { throw StoreError.damagedAttachment(sha) }
                return data
            }
            // Sealed: open each piece the range covers.
            let piece = Int64(Self.pieceBytes)
            let sealedPiece = UInt64(Self.pieceBytes + Self.indexBytes + sealOverhead)
            var result = Data()
            result.reserveCapacity(Int(end - offset))
            var index = offset / piece
            while index * piece < end {
                try handle.seek(toOffset: UInt64(index) * sealedPiece)
                guard let stored = try handle.read(upToCount: Int(sealedPiece)), !stored.isEmpty else {
                    throw StoreError.damagedAttachment(sha)
                }
                let plain: [UInt8]
                do { plain = try cipher.open([UInt8](stored)) } catch { throw StoreError.damagedAttachment(sha) }
                guard plain.count > Self.indexBytes,
                    plain[0..<Self.indexBytes].reduce(UInt64(0), { $0 << 8 | UInt64($1) }) == UInt64(index)
                else { throw StoreError.damagedAttachment(sha) }
                let pieceStart = index * piece
                let from = Int(max(offset, pieceStart) - pieceStart) + Self.indexBytes
                let to = Int(min(end, pieceStart + Int64(plain.count - Self.indexBytes)) - pieceStart) + Self.indexBytes
                guard from <= to else { throw StoreError.damagedAttachment(sha) }
                result.append(contentsOf: plain[from..<to])
                index += 1
            }
            guard result.count == Int(end - offset) else { throw StoreError.damagedAttachment(sha) }
            return result
        } catch let error as StoreError {
            throw error
        } catch {
            throw Self.storageError(error)
        }
    }

    /// Whether the file still holds the bytes its name promises (read whole, hashed).
    func verify(_ sha: String, size: Int64) -> Bool {
        var hash = SHA256()
        var offset: Int64 = 0
        while offset < size {
            guard let data = try? read(sha, size: size, from: offset, count: Self.pieceBytes), !data.isEmpty else { return false }
            data.withUnsafeBytes { hash.update($0) }
            offset += Int64(data.count)
        }
        return offset == size && hash.finishHex() == sha
    }

    // MARK: Removing

    func remove(_ sha: String) {
        try? FileManager.default.removeItem(at: url.appendingPathComponent(sha))
    }

    func removeLeftover(_ name: String) {
        try? FileManager.default.removeItem(at: url.appendingPathComponent(name))
    }

    /// Every blob file and the folder itself (a wipe, a destroyed store).
    func removeAll() throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }

    private static func storageError(_ error: any Error) -> StoreError {
        if let failure = error as? DurableFiles.Failure { return failure.isFull ? .diskFull : .ioFailure(failure.description) }
        let nsError = error as NSError
        if nsError.domain == NSPOSIXErrorDomain && nsError.code == Int(ENOSPC) { return .diskFull }
        if nsError.domain == NSCocoaErrorDomain && nsError.code == NSFileWriteOutOfSpaceError { return .diskFull }
        return .ioFailure(error.localizedDescription)
    }
}
