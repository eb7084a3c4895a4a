import Foundation
import OutpostCore
import Testing

/// The live benchmark's figures about the engines' CPU: reported with
/// every propagation run; timings are not asserted.
@Suite("Live bench figures", .timeLimit(.minutes(3)))
struct LiveBenchFiguresTests {
    @Test func propagationReportsTheEnginesCPUPerChangeAndWhileIdle() async throws {
        let station = try CommandLineTests.Workstation()
        let json = station.directory.path("bench.json")
        let result = try await station.run(["bench", "live", "--quick", "--live-devices", "2", "--idle", "2", "--json", json])
        #expect(result.status == 0, "\(result.stderr)")
        let data = try #require(FileManager.default.contents(atPath: json))
        guard case .array(let results)? = try JSONValue.parse(data).objectValue?["results"] else {
            Issue.record("no results in \(String(decoding: data, as: UTF8.self))")
            return
        }
        let propagation = try #require(
            results.first { $0.objectValue?["name"] == .string("live-propagation-2") }?.objectValue?["details"]?.objectValue,
            "live-propagation-2 and its details")
        for key in ["engine_cpu_ms_per_change", "server_cpu_ms_per_change", "idle_engines_cpu_percent", "cores_busy_during_rounds"] {
            guard let value = Self.number(propagation[key]) else {
                Issue.record("\(key) missing from \(propagation.keys.sorted())")
                continue
            }
            #expect(value >= 0, "\(key) is \(value)")
        }
        // Times from the push's answer: a device may commit before the
        // pusher reads its answer, so a time can be below zero, never absent.
        for key in ["first_round_max_ms", "p99_after_first_round_ms", "round_max_p50_ms"] {
            guard let value = Self.number(propagation[key]) else {
                Issue.record("\(key) missing from \(propagation.keys.sorted())")
                continue
            }
            #expect(value.isFinite && value > -1_000, "\(key) is \(value)")
        }
        guard let withIdle = Self.number(propagation["engine_cpu_ms_per_change_with_idle"]) else {
            Issue.record("engine_cpu_ms_per_change_with_idle missing")
            return
        }
        #expect(withIdle > 0, "the engines used CPU to store 20 changes")
        let names = results.compactMap { result -> String? in
            if case .string(let name)? = result.objectValue?["name"] { return name }
            return nil
        }
        #expect(!names.contains { $0.hasPrefix("live-commit-floor") }, "the commit floor runs at 100 devices and more only")
    }

    static func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let number)?: return Double(number)
        case .double(let number)?: return number
        default: return nil
        }
    }
}
