import COpenSSL
import Foundation
import OutpostCore
import OutpostSQLite

/// What the server holds of one blob.
struct BlobState: Sendable, Equatable {
    var size: Int64
    /// The first `received` bytes are stored.
    var received: Int64
    var complete: Bool
    var contentType: String?
    var uploader: String
}

/// Attachments' bytes, named by their SHA-256 (64 lowercase hex digits).
///
/// What is held of each blob is a row of `blobs` (size, bytes received,
/// complete, uploader). The bytes themselves are files in a folder beside a
/// SQLite database (`<database>.blobs/<sha256>`), and rows of `blob_chunks`
/// (hex in, `bytea` stored) on PostgreSQL, so every server on the database
/// sees every blob with no other component. Bytes are appended in pieces as
/// they arrive, never held whole in memory; `received` moves only after a
/// piece is stored, and only from where it was (compare and set), so two
/// uploads of one blob at once cannot interleave.
///
/// Nothing is answered for before it is durable: bytes are synced (and, for
/// a new file, the folder naming it) before `received` moves over them, and
/// a complete file is renamed into place and its folder synced before the
/// blob is marked complete. A power loss then never leaves a blob called
/// complete, or bytes called received, that the disk does not hold. Beside
/// a SQLite database an upload writes its pieces unsynced and moves
/// `received` over many at once (``write(_:at:_:)``, ``commit(_:from:to:owner:now:)``):
/// one sync per request or per ``syncBytes`` rather than one per piece.
final class BlobStore: Sendable {
    let database: any ServerDatabase
    /// The folder of blob files (SQLite); nil on PostgreSQL.
    let folder: String?

    init(database: any ServerDatabase, folder: String?) {
        self.database = database
        self.folder = folder
        if let folder { try? DurableFiles.createDirectory(folder) }
    }

    /// The largest piece kept in memory before it is stored (and the most a
    /// cut connection loses of an upload).
    static let pieceBytes = 256 * 1024

    /// Beside a SQLite database, the most an upload writes before it syncs
    /// and moves `received`: what a server crash (not a cut) may make a
    /// client send again, at most one of its largest pieces.
    static let syncBytes = 8 << 20

    static func isName(_ text: String) -> Bool { AttachedFile.isBlobName(text) }

    func state(_ sha: String) throws -> BlobState? {
        try database.read { sql in
            try sql.first(
                "SELECT size, received, complete, content_type, uploader FROM blobs WHERE sha256 = ?", [.text(sha)]
            ).map {
                BlobState(size: $0.int(0), received: $0.int(1), complete: $0.bool(2), contentType: $0.optionalString(3), uploader: $0.string(4))
            }
        }
    }

    /// Starts holding a blob of `size` bytes; the existing state when one is held.
    func begin(_ sha: String, size: Int64, contentType: String?, uploader: String, now: String) throws -> BlobState {
        try database.write { sql in
            try sql.execute(
                """
                INSERT INTO blobs (sha256, size, received, complete, content_type, uploader, created_at)
                VALUES (?, ?, 0, 0, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING
                """, [.text(sha), .integer(size), .text(contentType), .text(uploader), .text(now)])
            guard
                let row = try sql.first(
                    "SELECT size, received, complete, content_type, uploader FROM blobs WHERE sha256 = ?", [.text(sha)])
            else { throw DatabaseError(kind: .failure, message: "the blob row just made cannot be read back") }
            return BlobState(size: row.int(0), received: row.int(1), complete: row.bool(2), contentType: row.optionalString(3), uploader: row.string(4))
        }
    }

    /// Stores `bytes` at `offset`, which must be where the held bytes end,
    /// and records `owner` as an uploader; false when another upload moved
    /// it meanwhile (nothing is changed).
    func append(_ sha: String, at offset: Int64, _ bytes: [UInt8], owner: String, now: String) throws -> Bool {
        guard !bytes.isEmpty else { return true }
        if folder != nil {
            // The bytes first, then the mark: bytes past `received` are never read.
            try write(sha, at: offset, bytes)
            return try commit(sha, from: offset, to: offset + Int64(bytes.count), owner: owner, now: now)
        }
        return try database.write { sql in
            guard
                try sql.execute(
                    "UPDATE blobs SET received = ?, touched_at = ? WHERE sha256 = ? AND received = ? AND complete = 0",
                    [.integer(offset + Int64(bytes.count)), .text(now), .text(sha), .integer(offset)]) == 1
            else { return false }
            try sql.execute(
                "INSERT INTO blob_chunks (sha256, offset_bytes, data) VALUES (?, ?, decode(?, 'hex'))",
                [.text(sha), .integer(offset), .text(SHA256.hex(bytes))])
            try sql.execute(
                "INSERT INTO blob_owners (sha256, user_id) VALUES (?, ?) ON CONFLICT (sha256, user_id) DO NOTHING",
                [.text(sha), .text(owner)])
            return true
        }
    }

    /// Writes `bytes` at `offset` of the blob's unfinished file, unsynced:
    /// past `received`, they count for nothing until ``commit(_:from:to:owner:now:)``.
    /// Beside a SQLite database only.
    func write(_ sha: String, at offset: Int64, _ bytes: [UInt8]) throws {
        guard let folder, !bytes.isEmpty else { return }
        let path = folder + "/" + sha + ".part"
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        guard fd >= 0 else { throw DatabaseError(kind: .transient, message: "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + written, bytes.count - written, off_t(offset) + off_t(written)) }
            guard count > 0 else { throw DatabaseError(kind: .transient, message: "cannot write \(path): \(String(cString: strerror(errno)))") }
            written += count
        }
    }

    /// Makes the bytes `from ..< to` written by ``write(_:at:_:)`` durable,
    /// then moves `received` from `from` to `to` and records `owner` in one
    /// transaction; false when another upload moved it meanwhile (nothing
    /// is changed). Beside a SQLite database only.
    func commit(_ sha: String, from: Int64, to: Int64, owner: String, now: String) throws -> Bool {
        guard let folder, to > from else { return true }
        let path = folder + "/" + sha + ".part"
        do {
            try DurableFiles.syncFile(atPath: path)
            // The upload that made the file: its name must survive too.
            if from == 0 { try DurableFiles.syncDirectory(folder) }
        } catch {
            throw DatabaseError(kind: .transient, message: "\(error)")
        }
        return try database.write { sql in
            guard
                try sql.execute(
                    "UPDATE blobs SET received = ?, touched_at = ? WHERE sha256 = ? AND received = ? AND complete = 0",
                    [.integer(to), .text(now), .text(sha), .integer(from)]) == 1
            else { return false }
            try sql.execute(
                "INSERT INTO blob_owners (sha256, user_id) VALUES (?, ?) ON CONFLICT (sha256, user_id) DO NOTHING",
                [.text(sha), .text(owner)])
            return true
        }
    }

    /// Hands the stored bytes from `start` (up to `end`, exclusive) to `body` in pieces.
    func read(_ sha: String, from start: Int64 = 0, to end: Int64, _ body: ([UInt8]) throws -> Void) throws {
        guard start < end else { return }
        if let folder {
            let complete = folder + "/" + sha
            let path = FileManager.default.fileExists(atPath: complete) ? complete : complete + ".part"
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw DatabaseError(kind: .failure, message: "the bytes of blob \(sha) are missing")
            }
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(start))
            var position = start
            while position < end {
                let data = handle.readData(ofLength: Int(min(Int64(Self.pieceBytes), end - position)))
                guard !data.isEmpty else { throw DatabaseError(kind: .failure, message: "the bytes of blob \(sha) end early") }
                try body(Array(data))
                position += Int64(data.count)
            }
            return
        }
        // Chunks are stored where each upload piece began; read the ones that overlap.
        try database.read { sql in
            try sql.scan(
                """
                SELECT offset_bytes, encode(data, 'hex') FROM blob_chunks
                WHERE sha256 = ? AND offset_bytes < ? AND offset_bytes + length(data) > ? ORDER BY offset_bytes
                """, [.text(sha), .integer(end), .integer(start)]
            ) { row in
                let offset = row.int(0)
                guard let hex = row.text(1) else { return }
                var bytes = Self.bytes(hex: hex)
                let from = max(0, Int(start - offset))
                let to = min(bytes.count, Int(end - offset))
                if from > 0 || to < bytes.count { bytes = Array(bytes[from..<to]) }
                try body(bytes)
            }
        }
    }

    /// Whether the `size` stored bytes hash to `sha`.
    func matches(_ sha: String, size: Int64) throws -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { return false }
        try read(sha, to: size) { piece in
            _ = piece.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1 else { return false }
        return SHA256.hex(digest) == sha
    }

    /// Marks the blob complete (its bytes checked).
    func complete(_ sha: String, now: String) throws {
        if let folder {
            let part = folder + "/" + sha + ".part"
            if FileManager.default.fileExists(atPath: part) {
                do {
                    try DurableFiles.rename(part, to: folder + "/" + sha)
                } catch {
                    throw DatabaseError(kind: .transient, message: "\(error)")
                }
            }
        }
        _ = try database.write { sql in
            try sql.execute(
                "UPDATE blobs SET complete = 1, completed_at = ?, touched_at = ? WHERE sha256 = ?", [.text(now), .text(now), .text(sha)])
        }
    }

    /// The last bytes of an upload written by ``write(_:at:_:)`` and the
    /// whole checked: the file synced and renamed into place (its folder
    /// synced), then the blob marked complete and `owner` recorded in one
    /// commit. Beside a SQLite database only.
    func complete(written sha: String, owner: String, now: String) throws {
        guard let folder else { return }
        let part = folder + "/" + sha + ".part"
        do {
            try DurableFiles.syncFile(atPath: part)
            try DurableFiles.rename(part, to: folder + "/" + sha)
        } catch {
            throw DatabaseError(kind: .transient, message: "\(error)")
        }
        _ = try database.write { sql in
            try sql.execute(
                "UPDATE blobs SET received = size, complete = 1, completed_at = ?, touched_at = ? WHERE sha256 = ?",
                [.text(now), .text(now), .text(sha)])
            try sql.execute(
                "INSERT INTO blob_owners (sha256, user_id) VALUES (?, ?) ON CONFLICT (sha256, user_id) DO NOTHING",
                [.text(sha), .text(owner)])
        }
    }

    /// Whether `user` uploaded the blob (every byte of it, or a piece of an
    /// upload that completed): who may read it by its hash alone.
    func isOwner(_ sha: String, _ user: String) throws -> Bool {
        try database.read { sql in
            try sql.first("SELECT 1 FROM blob_owners WHERE sha256 = ? AND user_id = ?", [.text(sha), .text(user)]) != nil
        }
    }

    func addOwner(_ sha: String, _ user: String) throws {
        _ = try database.write { sql in
            try sql.execute(
                "INSERT INTO blob_owners (sha256, user_id) VALUES (?, ?) ON CONFLICT (sha256, user_id) DO NOTHING",
                [.text(sha), .text(user)])
        }
    }

    /// Forgets a blob and its bytes (a hash mismatch, housekeeping).
    func drop(_ sha: String) throws {
        _ = try database.write { sql in
            try sql.execute("DELETE FROM blob_chunks WHERE sha256 = ?", [.text(sha)])
            try sql.execute("DELETE FROM blob_owners WHERE sha256 = ?", [.text(sha)])
            try sql.execute("DELETE FROM blobs WHERE sha256 = ?", [.text(sha)])
        }
        if let folder {
            for path in [folder + "/" + sha, folder + "/" + sha + ".part"] { try? FileManager.default.removeItem(atPath: path) }
        }
    }

    /// Moves the held mark back to `offset` (a request refused after some of
    /// its bytes were stored keeps nothing of them).
    func truncate(_ sha: String, to offset: Int64) throws {
        _ = try database.write { sql in
            try sql.execute("DELETE FROM blob_chunks WHERE sha256 = ? AND offset_bytes >= ?", [.text(sha), .integer(offset)])
            try sql.execute(
                "UPDATE blobs SET received = ? WHERE sha256 = ? AND received > ? AND complete = 0",
                [.integer(offset), .text(sha), .integer(offset)])
        }
    }

    static func bytes(hex: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        func value(_ digit: UInt8) -> UInt8 {
            switch digit {
            case 0x30...0x39: return digit - 0x30
            case 0x61...0x66: return digit - 0x61 + 10
            case 0x41...0x46: return digit - 0x41 + 10
            default: return 0
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(hex.count / 2)
        var index = 0
        while index + 1 < hex.count {
            out.append(value(hex[index]) << 4 | value(hex[index + 1]))
            index += 2
        }
        return out
    }
}

extension BlobStore {
    /// The bytes `first ..< first + length` of a complete blob, read as the
    /// socket takes them: from the open file beside a SQLite database, from
    /// the overlapping `blob_chunks` rows on PostgreSQL. Nil when the file
    /// cannot be opened.
    func bodyReader(_ sha: String, first: Int64, length: Int64) -> ResponseBodyReader? {
        if let folder {
            let descriptor = open(folder + "/" + sha, O_RDONLY)
            guard descriptor >= 0 else { return nil }
            return ResponseBodyReader(
                length: length,
                read: { position, buffer in
                    let count = pread(descriptor, buffer.baseAddress, buffer.count, off_t(first + position))
                    return count > 0 ? count : nil
                },
                finished: { close(descriptor) })
        }
        return ResponseBodyReader(length: length) { [self] position, buffer in
            var filled = 0
            do {
                try read(sha, from: first + position, to: first + position + Int64(buffer.count)) { piece in
                    let count = min(piece.count, buffer.count - filled)
                    piece.withUnsafeBytes { bytes in
                        buffer.baseAddress!.advanced(by: filled).copyMemory(from: bytes.baseAddress!, byteCount: count)
                    }
                    filled += count
                }
            } catch {
                return nil
            }
            return filled > 0 ? filled : nil
        }
    }
}
