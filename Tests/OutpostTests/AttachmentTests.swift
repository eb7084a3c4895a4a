import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSQLite
import OutpostTesting
import Testing

/// A visit as a field worker captures it, with a photo of the house front.
struct PhotoVisit: SyncRecord, Equatable {
    static let collection = "visits"
    static let references = ["person": "people"]
    var person: String
    var visitedAt: String
    var notes: String?
    var photo: OutpostCore.AttachedFile?

    enum CodingKeys: String, CodingKey {
        case person, notes, photo
        case visitedAt = "visited_at"
    }
}

/// Bytes that look like a photo to no one: seeded, so a failure replays.
func photoBytes(_ count: Int, seed: UInt64) -> Data {
    var random = SeededRandom(seed: seed)
    return Data(random.bytes(count))
}

extension SyncHarness {
    /// What the server holds of a blob: (received, complete), nil when nothing.
    func serverBlob(_ sha: String) throws -> (received: Int64, complete: Bool)? {
        try server.database.read { sql in
            try sql.first("SELECT received, complete FROM blobs WHERE sha256 = ?", [.text(sha)]).map { (Int64($0.int(0)), $0.bool(1)) }
        }
    }
}

@Suite("Attachments on the device", .timeLimit(.minutes(2)))
struct AttachmentTests {
    /// A person and a visit naming a photo, captured on `device`.
    func captureVisit(_ device: SyncHarness.Device, photo: OutpostCore.AttachedFile?, notes: String = "door") async throws -> UUID {
        let person = try await device.store.create(Person(name: "Romero"))
        return try await device.store.create(
            PhotoVisit(person: person.wireText, visitedAt: "2026-11-29T10:00:00Z", notes: notes, photo: photo))
    }

    @Test func aPhotoCapturedOfflineIsUploadedBeforeItsRecordAndTheCoordinatorSeesIt() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("u-1")
        field.network.isOffline = true
        let bytes = photoBytes(700_000, seed: 1)
        let photo = try await field.store.attach(bytes, contentType: "image/jpeg")
        #expect(photo.sha256 == SHA256.hex(of: bytes) && photo.size == 700_000)
        let visit = try await captureVisit(field, photo: photo)
        #expect(try await field.store.attachmentState(photo) == .waiting)
        let waiting = try await field.store.attachmentSummary()
        #expect(waiting.waiting == 1 && waiting.bytesWaiting == 700_000, "\(waiting)")
        await #expect(throws: SyncFailure.offline) { try await field.engine.sync() }
        #expect(try harness.serverBlob(photo.sha256) == nil)

        field.network.isOffline = false
        let report = try await field.engine.sync()
        #expect(report.attachmentsUploaded == 1 && report.failure == nil, "\(report)")
        #expect(try harness.serverBlob(photo.sha256)?.complete == true)
        let order = field.network.delivered.map { "\($0.method) \($0.target.prefix(9))" }
        let put = try #require(order.firstIndex(of: "PUT /v1/blobs"), "\(order)")
        let lastPush = try #require(order.lastIndex(of: "POST /v1/push"))
        #expect(put < lastPush, "the photo goes before the record that names it: \(order)")
        #expect(try await field.store.get(PhotoVisit.self, visit)?.syncState == .synced)
        #expect(try await field.store.attachmentState(photo) == .onDevice)
        #expect(try await field.store.attachmentSummary().waiting == 0)
        // A record type with a photo is queried by key path like any other.
        #expect(try await field.store.query(PhotoVisit.self, where: .isNil(\.photo)).isEmpty)
        #expect(try await field.store.query(PhotoVisit.self, where: .equals(\.photo, photo)).map(\.uuid) == [visit])

        let coordinator = try harness.device("c-1", role: .coordinator)
        try await coordinator.engine.sync()
        let seen = try #require(try await coordinator.store.get(PhotoVisit.self, visit)?.value.photo)
        #expect(seen == photo)
        #expect(try await coordinator.store.attachmentState(seen) == .notDownloaded)
        let download = coordinator.engine.attachmentData(seen)
        var steps: [AttachmentProgress] = []
        for try await step in download { steps.append(step) }
        #expect(try await download.data == bytes)
        #expect(steps.first?.bytesDone == 0 && steps.last?.bytesDone == 700_000, "progress from 0 to the whole: \(steps)")
        #expect(try await coordinator.store.attachmentState(seen) == .onDevice, "kept for the next look")
        coordinator.network.isOffline = true
        #expect(try await coordinator.store.attachmentData(seen).data == bytes, "read offline from the device once downloaded")
    }

    @Test func aChangeWaitingForItsPhotoNeverHoldsBackOtherRecords() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("u-1")
        let photo = try await field.store.attach(photoBytes(300_000, seed: 2), contentType: "image/jpeg")
        let visit = try await captureVisit(field, photo: photo)
        try await field.store.create(Person(name: "Other"))
        // Every upload is answered "not now".
        field.network.inject(.status(503, retryAfter: 1)) { $0.method == "PUT" }
        await #expect(throws: SyncFailure.self) { try await field.engine.sync() }
        let names = try harness.serverRecords().compactMap(\.data)
        #expect(names.contains { $0.contains("Other") } && names.contains { $0.contains("Romero") }, "\(names)")
        #expect(try harness.serverRecords("visits").isEmpty, "the visit waits for its photo")
        #expect(try await field.store.get(PhotoVisit.self, visit)?.syncState == .pending)
        let state = try await field.store.attachmentState(photo)
        #expect(state == .waiting || state.description.hasPrefix("uploading"), "\(state)")
    }

    @Test func anUploadCutAfterAPieceResumesFromTheServersOffset() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.liveUpdates = false
        options.reconnectJitter = .zero
        let field = try harness.device("u-1", options: options)
        let bytes = photoBytes(6_000_000, seed: 3)
        let photo = try await field.store.attach(bytes, contentType: "image/jpeg")
        _ = try await captureVisit(field, photo: photo)
        // The first piece reaches the server, its answer is lost.
        let puts = Locked(0)
        field.network.inject(.dropResponse) { request in
            guard request.method == "PUT" else { return false }
            return puts.withLock { count in
                count += 1
                return count == 1
            }
        }
        await #expect(throws: SyncFailure.noAnswer) { try await field.engine.sync() }
        let held = try #require(try harness.serverBlob(photo.sha256))
        #expect(held.received > 0 && !held.complete)
        try await field.engine.sync()
        #expect(try harness.serverBlob(photo.sha256)?.complete == true)
        #expect(try harness.serverRecords("visits").count == 1)
        let ranges = field.network.delivered.filter { $0.method == "PUT" }.compactMap { $0.headers["Content-Range"] }
        let starts = ranges.compactMap { Int64($0.dropFirst(6).split(separator: "-")[0]) }
        #expect(starts == starts.sorted() && Set(starts).count == starts.count, "no piece sent twice: \(ranges)")
        #expect(field.network.delivered.contains { $0.method == "HEAD" }, "the resumed upload asked where the server stood")
    }

    /// A whole upload notes nothing before it goes, so an upload the device
    /// never heard of (a crash mid-body, or another device of the same
    /// person) starts from 0: the server's 409 says where to go on from.
    @Test func anUploadNobodyNotedGoesOnFromTheServersOffsetAndStoresEachByteOnce() async throws {
        let harness = try SyncHarness()
        var options = SyncOptions()
        options.periodicInterval = nil
        options.liveUpdates = false
        options.reconnectJitter = .zero
        let phone = try harness.device("u-1", name: "phone", options: options)
        let bytes = photoBytes(6_000_000, seed: 4)
        let photo = try await phone.store.attach(bytes, contentType: "image/jpeg")
        _ = try await captureVisit(phone, photo: photo)
        phone.network.inject(.dropResponse) { $0.method == "PUT" }
        await #expect(throws: SyncFailure.noAnswer) { try await phone.engine.sync() }
        let held = try #require(try harness.serverBlob(photo.sha256)).received
        #expect(held > 0 && held < 6_000_000)

        let tablet = try harness.device("u-1", name: "tablet", options: options)
        let same = try await tablet.store.attach(bytes, contentType: "image/jpeg")
        _ = try await captureVisit(tablet, photo: same)
        let report = try await tablet.engine.sync()
        #expect(report.failure == nil && report.attachmentsUploaded == 1, "\(report)")
        #expect(try harness.serverBlob(photo.sha256)?.complete == true)
        let puts = tablet.network.delivered.filter { $0.method == "PUT" }
        let starts = puts.compactMap { $0.headers["Content-Range"] }.compactMap { Int64($0.dropFirst(6).split(separator: "-")[0]) }
        #expect(starts.first == 0 && starts.dropFirst().first == held, "refused at 0, then from the server's offset: \(starts)")
        #expect(!tablet.network.delivered.contains { $0.method == "HEAD" }, "nothing noted: no question first")
        #expect(harness.server.metrics.blobBytesReceivedTotal == 6_000_000, "every byte stored once")
        #expect(try await tablet.store.attachmentState(same) == .onDevice)
    }

    /// Photos uploaded in quick succession are marked in the store together;
    /// none is left unmarked when the sync ends, and the status says so.
    @Test func photosUploadedInQuickSuccessionAreAllMarkedBeforeTheSyncEnds() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("u-1")
        var photos: [OutpostCore.AttachedFile] = []
        for index in 0..<12 {
            let photo = try await field.store.attach(photoBytes(40_000, seed: UInt64(100 + index)), contentType: "image/jpeg")
            _ = try await captureVisit(field, photo: photo, notes: "visit \(index)")
            photos.append(photo)
        }
        let report = try await field.engine.sync()
        #expect(report.failure == nil && report.attachmentsUploaded == 12, "\(report)")
        for photo in photos { #expect(try await field.store.attachmentState(photo) == .onDevice) }
        #expect(try await field.store.attachmentSummary().waiting == 0)
        #expect(await field.engine.currentStatus.attachments.waiting == 0, "the status was published after the last mark")
        #expect(try harness.serverRecords("visits").count == 12, "every visit released by its photo was pushed")
        let puts = field.network.delivered.filter { $0.method == "PUT" }
        #expect(puts.count == 12, "each photo sent once: \(puts.count)")
    }

    @Test func missingAttachmentUploadsAgainAndResendsTheChange() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("u-1")
        let photo = try await field.store.attach(photoBytes(100_000, seed: 4), contentType: "image/png")
        _ = try await captureVisit(field, photo: nil)
        try await field.engine.sync()
        // The device believes the photo uploaded; the server never got it
        // (a server restored from an older backup, say).
        let side = try SQLiteConnection(path: field.store.path)
        _ = try side.run("UPDATE blobs SET upload = 'uploaded', uploaded_bytes = size WHERE sha256 = ?", [.text(photo.sha256)])
        side.close()
        let visit = try #require(try await field.store.query(PhotoVisit.self).first)
        try await field.store.update(PhotoVisit.self, visit.uuid) { $0.photo = photo }
        let report = try await field.engine.sync()
        #expect(report.reuploads == 1 && report.rejected.isEmpty, "\(report)")
        #expect(try harness.serverBlob(photo.sha256)?.complete == true)
        let stored = try #require(try harness.serverRecords("visits").first?.data)
        #expect(stored.contains(photo.sha256))
        #expect(try await field.store.get(PhotoVisit.self, visit.uuid)?.syncState == .synced)
    }

    @Test func aPhotoTheServerRefusesRefusesItsRecordVisiblyAndTheRestGoesOn() async throws {
        var config = try ServerConfig()
        config.maxBlobBytes = 200_000
        let harness = try SyncHarness(config: config)
        let field = try harness.device("u-1")
        let big = try await field.store.attach(photoBytes(300_000, seed: 5), contentType: "video/mp4")
        let small = try await field.store.attach(photoBytes(50_000, seed: 6), contentType: "image/jpeg")
        let refused = try await captureVisit(field, photo: big, notes: "big")
        let fine = try await captureVisit(field, photo: small, notes: "small")
        let report = try await field.engine.sync()
        #expect(report.rejected.map(\.rejection.code) == ["attachment_not_uploaded"], "\(report)")
        #expect(try await field.store.get(PhotoVisit.self, refused)?.syncState == .rejected)
        #expect(try await field.store.get(PhotoVisit.self, fine)?.syncState == .synced)
        guard case .failed(let reason) = try await field.store.attachmentState(big) else {
            Issue.record("the big file is failed with its reason")
            return
        }
        #expect(reason.contains("larger"))
        #expect(try await field.store.attachmentSummary().failed == 1)
        // The person attaches a smaller file to the refused record: it goes.
        let smaller = try await field.store.attach(photoBytes(80_000, seed: 7), contentType: "image/jpeg")
        try await field.store.update(PhotoVisit.self, refused) { $0.photo = smaller }
        try await field.engine.sync()
        #expect(try await field.store.get(PhotoVisit.self, refused)?.syncState == .synced)
    }

    @Test func synchedPhotosAreEvictedAboveTheBudgetAndUnsentOnesNever() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("u-1")
        try await field.store.setAttachmentStorageBudget(250_000)
        field.network.isOffline = true
        var photos: [OutpostCore.AttachedFile] = []
        var data: [Data] = []
        for seed in 10..<14 {
            let bytes = photoBytes(100_000, seed: UInt64(seed))
            data.append(bytes)
            let photo = try await field.store.attach(bytes, contentType: "image/jpeg")
            photos.append(photo)
            _ = try await captureVisit(field, photo: photo, notes: "visit \(seed)")
        }
        _ = try? await field.engine.sync()
        for photo in photos { #expect(try await field.store.attachmentState(photo) == .waiting, "unsent: never evicted") }
        #expect(try await field.store.attachmentSummary().bytesOnDevice == 400_000)

        field.network.isOffline = false
        try await field.engine.sync()
        let summary = try await field.store.attachmentSummary()
        #expect(summary.bytesOnDevice <= 250_000, "\(summary)")
        var states: [AttachmentState] = []
        for photo in photos { states.append(try await field.store.attachmentState(photo)) }
        #expect(states.filter { $0 == .notDownloaded }.count == 2, "\(states)")
        #expect(states.last == .onDevice, "the most recently used stays")
        // An evicted one downloads again on demand, and another goes to fit.
        let evicted = try #require(photos.indices.first { states[$0] == .notDownloaded })
        #expect(try await field.store.attachmentData(photos[evicted]).data == data[evicted])
        #expect(try await field.store.attachmentState(photos[evicted]) == .onDevice)
        #expect(try await field.store.attachmentSummary().bytesOnDevice <= 250_000)
    }

    @Test func aCrashBetweenCopyingAPhotoAndWritingItsRecordLeavesNeitherHalf() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("u-1")
        let orphan = try await field.store.attach(photoBytes(60_000, seed: 20), contentType: "image/jpeg")
        // Leftovers an interrupted copy would leave: a temporary file and a file with no row.
        let folder = field.store.path + ".blobs"
        #expect(FileManager.default.createFile(atPath: folder + "/.incoming-crashed", contents: Data([1, 2, 3])))
        #expect(FileManager.default.createFile(atPath: folder + "/" + String(repeating: "ab", count: 32), contents: Data([4])))
        await field.store.close()

        // The app is launched again: the store opens the same database.
        let store = try LocalStore(path: field.store.path, collections: [Person.descriptor, Visit.descriptor])
        let engine = SyncEngine(
            store: store, transport: field.network, token: try harness.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil),
            options: { var options = SyncOptions(); options.periodicInterval = nil; options.liveUpdates = false; return options }(),
            clock: harness.clock)
        let kept = try await store.attach(photoBytes(40_000, seed: 21), contentType: "image/jpeg")
        let person = try await store.create(Person(name: "Ana"))
        try await store.create(PhotoVisit(person: person.wireText, visitedAt: "2026-11-29T10:00:00Z", photo: kept))
        try await engine.sync()
        #expect(try harness.serverBlob(orphan.sha256) == nil, "a photo no record names is never uploaded")
        #expect(try await store.attachmentState(orphan) == .notDownloaded, "its row is gone")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(files == [kept.sha256], "only the file a record names stays: \(files)")
        #expect(try harness.serverBlob(kept.sha256)?.complete == true)
    }

    @Test func sealedStoresSealTheirPhotosAtRest() async throws {
        let directory = try TemporaryDirectory()
        let cipher = try AESGCMCipher(key: AESGCMCipher.makeKey())
        let path = directory.path("sealed.sqlite")
        let store = try LocalStore(path: path, collections: [Person.descriptor, Visit.descriptor], cipher: cipher)
        var bytes = Data("PLAINTEXT-MARKER-".utf8)
        bytes.append(photoBytes(2_300_000, seed: 30))
        bytes.append(Data("-PLAINTEXT-MARKER".utf8))
        let photo = try await store.attach(bytes, contentType: "image/jpeg")
        let file = try Data(contentsOf: URL(fileURLWithPath: path + ".blobs/" + photo.sha256))
        #expect(file.range(of: Data("PLAINTEXT-MARKER".utf8)) == nil, "no clear byte on the disk")
        #expect(file.count > bytes.count)
        #expect(try await store.attachmentData(photo).data == bytes)
        await store.close()
        let reopened = try LocalStore(path: path, collections: [Person.descriptor, Visit.descriptor], cipher: cipher)
        #expect(try await reopened.attachmentData(photo).data == bytes)
        // A piece altered on the disk is refused, not returned.
        var altered = file
        altered[altered.count / 2] ^= 0xff
        try altered.write(to: URL(fileURLWithPath: path + ".blobs/" + photo.sha256))
        await #expect(throws: StoreError.self) { try await reopened.attachmentData(photo).data }
    }

    @Test func signOutRemovesThePhotosFolder() async throws {
        let harness = try SyncHarness()
        let field = try harness.device("u-1")
        let photo = try await field.store.attach(photoBytes(10_000, seed: 40), contentType: "image/jpeg")
        _ = try await captureVisit(field, photo: photo)
        try await field.engine.sync()
        #expect(FileManager.default.fileExists(atPath: field.store.path + ".blobs/" + photo.sha256))
        try await field.engine.signOut(unsentChanges: .discard)
        #expect(!FileManager.default.fileExists(atPath: field.store.path + ".blobs"))
        #expect(try await field.store.attachmentState(photo) == .notDownloaded)
    }

    @Test func aPhoneRestoredFromABackupSendsItsPhotoOnceAndStoresItOnce() async throws {
        let harness = try SyncHarness()
        let phone = try harness.device("u-1", name: "phone")
        let bytes = photoBytes(500_000, seed: 50)
        let photo = try await phone.store.attach(bytes, contentType: "image/jpeg")
        let visit = try await captureVisit(phone, photo: photo)
        // Backed up with the photo unsent, then synced.
        let backup = harness.directory.path("phone-backup.sqlite")
        try RestoredDeviceTests.backup(phone.store.path, to: backup)
        try FileManager.default.copyItem(atPath: phone.store.path + ".blobs", toPath: backup + ".blobs")
        try await phone.engine.sync()
        await phone.engine.stop()
        await phone.store.close()
        // The phone comes back on the backup: the photo and its visit look unsent again.
        try RestoredDeviceTests.restore(backup, to: phone.store.path)
        try FileManager.default.removeItem(atPath: phone.store.path + ".blobs")
        try FileManager.default.copyItem(atPath: backup + ".blobs", toPath: phone.store.path + ".blobs")
        let restored = try harness.device("u-1", name: "phone", seed: 99)
        #expect(try await restored.store.attachmentState(photo) == .waiting)
        let report = try await restored.engine.sync()
        #expect(report.failure == nil && report.rejected.isEmpty, "\(report)")
        let blobs = try harness.server.database.read { sql in
            try sql.query("SELECT sha256, complete FROM blobs", []).map { ($0.string(0), $0.bool(1)) }
        }
        #expect(blobs.count == 1 && blobs[0] == (photo.sha256, true), "one blob, named by its content: \(blobs)")
        #expect(try harness.serverRecords("visits").count == 1, "the visit once")
        #expect(try await restored.store.get(PhotoVisit.self, visit)?.syncState == .synced)
        #expect(try await restored.store.attachmentState(photo) == .onDevice)
    }

    @Test func badAttachmentsAreRefusedAndStoreNothing() async throws {
        let fixture = try StoreFixture()
        await #expect(throws: StoreError.self) {
            try await fixture.store.attach(contentsOf: URL(fileURLWithPath: fixture.directory.path("missing.jpg")))
        }
        await #expect(throws: StoreError.self) { try await fixture.store.attach(Data([1]), contentType: "") }
        await #expect(throws: StoreError.self) { try await fixture.store.attach(Data([1]), contentType: "image/jpeg\nX-Evil: 1") }
        #expect(try await fixture.store.attachmentSummary() == AttachmentSummary())
        let files = (try? FileManager.default.contentsOfDirectory(atPath: fixture.path + ".blobs")) ?? []
        #expect(files.allSatisfy { !OutpostCore.AttachedFile.isBlobName($0) }, "\(files)")
        // A file is copied piece by piece and named by its hash.
        let source = fixture.directory.path("door.JPG")
        let bytes = photoBytes(3_000_001, seed: 41)
        try bytes.write(to: URL(fileURLWithPath: source))
        let photo = try await fixture.store.attach(contentsOf: URL(fileURLWithPath: source))
        #expect(photo.contentType == "image/jpeg" && photo.size == 3_000_001 && photo.sha256 == SHA256.hex(of: bytes))
        #expect(try await fixture.store.attachmentData(photo).data == bytes)
    }
}
