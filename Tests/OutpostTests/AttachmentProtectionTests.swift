import Foundation
import Outpost
import OutpostSQLite
import OutpostTesting
import Testing

/// Attachment files take the store's data protection class, as its database files do.
@Suite("Attachment file protection", .timeLimit(.minutes(1)))
struct AttachmentProtectionTests {
    @Test func eachClassMapsToFoundationsOwn() {
        #expect(FileProtection.complete.fileProtectionType.rawValue == FileProtectionType.complete.rawValue)
        #expect(FileProtection.untilFirstUnlock.fileProtectionType.rawValue == FileProtectionType.completeUntilFirstUserAuthentication.rawValue)
        #expect(FileProtection.none.fileProtectionType.rawValue == FileProtectionType.none.rawValue)
        let attribute = FileProtection.complete.fileAttributes[.protectionKey] as? FileProtectionType
        #expect(attribute?.rawValue == FileProtectionType.complete.rawValue)
    }

    @Test(arguments: [FileProtection.complete, .untilFirstUnlock, .none])
    func theStoresClassReachesItsAttachmentFiles(_ protection: FileProtection) async throws {
        let directory = try TemporaryDirectory()
        let store = try LocalStore(path: directory.path("device.sqlite"), collections: [Person.descriptor], protection: protection)
        #expect(await store.attachmentFileProtection == protection)
        // A file is still written and read back whole under every class.
        let photo = try await store.attach(Data(repeating: 7, count: 4096), contentType: "image/jpeg")
        #expect(try await store.attachmentData(photo).data.count == 4096)
        await store.close()
    }
}
