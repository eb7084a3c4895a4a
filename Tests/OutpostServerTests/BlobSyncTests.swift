import Foundation
import OutpostCore
import OutpostSQLite
@testable import OutpostServer
import OutpostTesting
import Testing

/// Beside a SQLite database an upload's pieces are written unsynced and made
/// durable together: once per request (or per `BlobStore.syncBytes`), not
/// once per piece, and never after `received` moved over them.
@Suite("Blob syncs", .serialized, .timeLimit(.minutes(3)))
struct BlobSyncTests {
    /// Every sync under the blobs' folder, in order.
    final class SyncLog: DurableFilesObserver, @unchecked Sendable {
        // @unchecked Sendable: `entries` is read and written under `lock`.
        private let lock = NSLock()
        private var entries: [String] = []

        var all: [String] {
            lock.lock()
            defer { lock.unlock() }
            return entries
        }

        private func add(_ entry: String) {
            lock.lock()
            defer { lock.unlock() }
            entries.append(entry)
        }

        func synced(file path: String) { add("file " + (path as NSString).lastPathComponent) }
        func synced(directory path: String) { add("folder") }
        func renamed(from source: String, to destination: String) { add("rename") }
    }

    func upload(_ count: Int, seed: UInt8) async throws -> (log: [String], live: LiveServer, sha: String, bytes: [UInt8], token: String) {
        let live = try LiveServer(.sqlite)
        let folder = try #require(live.server.blobs.folder)
        let log = SyncLog()
        DurableFiles.observe(folder, log)
        defer { DurableFiles.stopObserving(folder) }
        let token = try live.token("f-1")
        let photo = BlobTests.blob(count, seed: seed)
        let answer = try await BlobTests().put(live, photo.sha, photo.bytes, token: token)
        #expect(answer.status == 200 && answer.text.contains(#""complete":true"#), "\(answer.text)")
        return (log.all, live, photo.sha, photo.bytes, token)
    }

    @Test func aWholeUploadSyncsItsFileOnceNotOncePerPiece() async throws {
        // Twelve pieces of 256 KiB.
        let (log, live, sha, bytes, token) = try await upload(3 * 1_048_576, seed: 11)
        defer { live.http.stop() }
        #expect(log.filter { $0 == "file \(sha).part" }.count == 1, "\(log)")
        // The file's bytes synced, then renamed into place and its folder synced: nothing between.
        #expect(log == ["file \(sha).part", "rename", "folder"], "\(log)")
        #expect(Array(try await BlobTests().get(live, sha, token: token).body) == bytes)
        #expect(live.server.metrics.blobBytesReceivedTotal == UInt64(bytes.count))
    }

    @Test func aLargeUploadSyncsEverySyncBytesSoACrashLosesLittle() async throws {
        let count = 2 * BlobStore.syncBytes + 1_000_000
        let (log, live, sha, bytes, token) = try await upload(count, seed: 12)
        defer { live.http.stop() }
        #expect(log.filter { $0 == "file \(sha).part" }.count == 3, "\(log)")
        #expect(Array(try await BlobTests().get(live, sha, token: token).body) == bytes)
    }
}
