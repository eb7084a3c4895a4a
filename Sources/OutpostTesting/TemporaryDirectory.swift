public import Foundation

/// A fresh folder for one test's database files, removed when released.
public final class TemporaryDirectory: Sendable {
    public let url: URL

    public init(prefix: String = "outpost-test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString.lowercased())", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of a file inside the folder.
    public func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
