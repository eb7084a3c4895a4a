import Foundation
import OutpostCore
import OutpostServer
import OutpostTesting
import Testing

/// The README's tour of the command line says what some commands print;
/// this runs them against a server and checks they still print that.
@Suite("README tour", .timeLimit(.minutes(3)))
struct ReadmeTourTests {
    /// The tour's lines `outpost … # comment`, by command.
    static func tourComments() throws -> [String: String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let section = readme.range(of: "## A five-minute tour of the command line"),
            let start = readme[section.upperBound...].range(of: "```sh\n"),
            let end = readme[start.upperBound...].range(of: "```")
        else { throw TourMissing() }
        var comments: [String: String] = [:]
        for line in readme[start.upperBound..<end.lowerBound].split(separator: "\n") {
            guard let hash = line.range(of: "# ") else { continue }
            let command = line[..<hash.lowerBound].trimmingCharacters(in: .whitespaces)
            if comments[command] == nil { comments[command] = String(line[hash.upperBound...]) }
        }
        return comments
    }

    struct TourMissing: Error {}

    @Test func theCommandsPrintWhatTheTourSays() async throws {
        let comments = try Self.tourComments()
        let station = try CommandLineTests.Workstation()
        try await station.login()

        // "outpost sync   # Synced: sent 1, confirmed 1, conflicts 0, rejected 0, received 19."
        let syncSays = try #require(comments["outpost sync"])
        #expect(try await station.run(["add", "people", "name=Lucía Romero", "phone=555-0101", "section:=4"]).status == 0)
        let synced = try await station.run(["sync"])
        #expect(synced.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == syncSays, "\(synced.stdout)")

        // "outpost status   # Connection: offline … "You're offline. …""
        let statusSays = try #require(comments["outpost status"])
        station.stopServer()
        #expect(try await station.run(["add", "people", "name=Olga Petrova"]).status == 0)
        let status = try await station.run(["status"])
        for part in statusSays.components(separatedBy: " … ") {
            let quoted = part.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
            let stem = quoted.components(separatedBy: " on ").first ?? quoted
            #expect(status.stdout.contains(stem), "the tour says \(statusSays); status printed \(status.stdout)")
        }

        // "outpost --version   # outpost 0.3.0 (…)"
        let versionSays = try #require(comments["outpost --version"])
        let version = try await station.run(["--version"])
        #expect(versionSays.hasPrefix(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + " "), "\(version.stdout)")
    }
}
