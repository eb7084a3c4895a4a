import Foundation
import Outpost
import OutpostCore
import OutpostTesting
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Nothing a person typed is lost, whatever a crash does. A child
/// process writes through the store and is killed with SIGKILL at a random
/// moment, 20 times over the same database.
@Suite("Crash safety", .timeLimit(.minutes(10)))
struct CrashTests {
    struct CrashCounter: SyncRecord, Equatable {
        static let collection = "counters"
        var n: Int
    }

    /// The crash writer is built next to the test bundle.
    static var writerURL: URL { ChildProcess.product("OutpostCrashWriter") }

    @Test(.timeLimit(.minutes(3)))
    func sigkillMidWriteLosesNoCommittedChange() async throws {
        let directory = try TemporaryDirectory(prefix: "outpost-crash")
        let database = directory.path("device.sqlite")
        var random = SeededRandom(seed: 2026)
        var created: Set<String> = []
        var deleted: Set<String> = []
        var deleteAnnounced: Set<String> = []
        var lastValue: [String: Int] = [:]
        var seqs: [Int64] = []
        var runsThatWrote = 0

        for run in 0..<20 {
            let output = directory.path("run-\(run).log")
            _ = FileManager.default.createFile(atPath: output, contents: nil)
            let process = try SpawnedProcess(Self.writerURL, [database, String(random.next() % 1_000_000)], stdout: .file(output))
            // Kill at a random moment after the store is open (a loaded
            // machine may take long to start the process at all).
            let opened = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < opened,
                !((try? String(contentsOfFile: output, encoding: .utf8))?.hasPrefix("R\n") ?? false)
            {
                try await Task.sleep(for: .milliseconds(10))
            }
            let delay = 50 + Int(random.next() % 400)
            try await Task.sleep(for: .milliseconds(delay))
            process.signal(SIGKILL)
            #expect(process.wasKilledBySignal, "run \(run) was killed, not finished")

            // Only complete lines were acknowledged after a commit.
            let text = try String(contentsOfFile: output, encoding: .utf8)
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            if !text.hasSuffix("\n") { lines.removeLast() }
            var writes = 0
            for line in lines {
                let parts = line.split(separator: " ").map(String.init)
                switch parts.first {
                case "C":
                    created.insert(parts[1])
                    lastValue[parts[1]] = 0
                    writes += 1
                case "U":
                    lastValue[parts[1]] = Int(parts[2])
                    writes += 1
                case "D":
                    deleted.insert(parts[1])
                    writes += 1
                case "d": deleteAnnounced.insert(parts[1])
                case "S": seqs.append(Int64(parts[1])!)
                default: break
                }
            }
            if writes > 0 { runsThatWrote += 1 }

            let store = try LocalStore(path: database, collections: [CrashCounter.descriptor])
            let problems = try await store.integrityProblems()
            #expect(problems == [], "run \(run): \(problems)")
            for uuid in created {
                let record = try await store.get(CrashCounter.self, UUID.fromWire(uuid)!)
                if deleteAnnounced.contains(uuid) && !deleted.contains(uuid) {
                    // Killed between the delete's commit and its acknowledgement: either is right.
                    continue
                } else if deleted.contains(uuid) {
                    #expect(record == nil, "run \(run): deleted \(uuid) came back")
                } else {
                    guard let stored = record else {
                        let history = try (0...run).flatMap { index in
                            try String(contentsOfFile: directory.path("run-\(index).log"), encoding: .utf8)
                                .split(separator: "\n").filter { $0.contains(uuid) || $0.hasPrefix("R") }.map { "\(index): \($0)" }
                        }
                        Issue.record("run \(run): acknowledged create \(uuid) is missing; history: \(history.joined(separator: " | "))")
                        continue
                    }
                    // A write may commit just before the kill without being acknowledged.
                    #expect(stored.value.n >= lastValue[uuid] ?? 0, "run \(run): \(uuid) lost an update")
                }
            }
            let lastSeq = try await store.lastSeq()
            #expect(lastSeq >= (seqs.max() ?? 0), "run \(run): the seq counter went backwards")
            await store.close()
        }
        #expect(runsThatWrote >= 15, "most runs must have written before being killed")
        #expect(created.count > 100)
        // Seqs handed out across every run never repeat a lower number, except
        // that a resend of an unanswered entry reuses its own seq.
        var highest: Int64 = 0
        var seen: Set<Int64> = []
        for seq in seqs {
            #expect(seq > highest || seen.contains(seq), "seq \(seq) was handed out again after \(highest)")
            highest = max(highest, seq)
            seen.insert(seq)
        }
    }
}

