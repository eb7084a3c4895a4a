import Foundation
import OutpostSimulation

/// `outpost simulate`: runs the deterministic simulation over many seeds.
enum SimulateCommand {
    static let help = """
        Usage: outpost simulate [--seeds N] [--from SEED] [--devices D] [--ops K] [--fault-rate PERCENT] [--no-live]
                               [--no-durable-commits] [--merge-fields] [--own-tables [--database URL]] [--trace]

        Runs the real client engine and store on several simulated devices against the real
        server's request handling (SQLite), through a network that drops requests and answers,
        delivers twice or late, fails with 5xx and 503, partitions, crashes devices, skews their
        clocks and expires their tokens; devices are restored from backups, cloned, meet full
        and failing disks, damaged rows, oversized and malformed captures and a frozen server;
        devices and the server lose their power at any write or sync (what was not synced to
        their disks is gone).
        Devices keep live channels between syncs; their streams stall, are cut, fail to open,
        repeat old events and hand over events of channels already replaced. After each seed the
        network heals, every device signs in once, the live channels alone bring it up to date
        (no manual sync), and invariants I1-I10 are checked. A failing seed prints a command that
        replays it.

          --seeds N           how many seeds to run (default 100)
          --from SEED         the first seed (default 1); seeds run consecutively
          --devices D         devices per run (default 4)
          --ops K             workload steps per run (default 50)
          --fault-rate P      percent of requests that meet a fault (default 15)
          --no-live           no live channels: devices sync by hand until quiet, as before
          --no-durable-commits  commits not synced to the disk (device and server): power
                              losses then lose acknowledged work, and seeds must fail
          --merge-fields      the server resolves conflicts by field (merge_fields) in every
                              writable collection, instead of letting its copy win
          --own-tables        the server runs on PostgreSQL (a database of its own per seed, in the
                              cluster of --database or $OUTPOST_TEST_POSTGRES_URL), `people` is a
                              table of the app's own, and the company's backend edits, adds and
                              deletes people in it between the devices' steps; at the end the
                              server's copies must also equal the table
          --trace             print every step, fault and sync of each seed (to replay one)
        """

    static func run(_ words: [String]) async throws {
        var arguments = try Arguments(words, flagNames: ["trace", "no-live", "no-durable-commits", "merge-fields", "own-tables"])
        let seeds = try arguments.integer("seeds", in: 1...1_000_000) ?? 100
        let first = UInt64(try arguments.integer("from", in: 0...Int.max) ?? 1)
        let devices = try arguments.integer("devices", in: 1...32) ?? 4
        let operations = try arguments.integer("ops", in: 1...100_000) ?? 50
        let faultRate = try arguments.integer("fault-rate", in: 0...100) ?? 15
        let live = !arguments.flag("no-live")
        let durableCommits = !arguments.flag("no-durable-commits")
        let mergeFields = arguments.flag("merge-fields")
        var ownTables: String?
        if arguments.flag("own-tables") {
            guard let url = arguments.option("database") ?? ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES_URL"] else {
                throw UsageError("--own-tables needs a PostgreSQL cluster: --database postgres://… (or OUTPOST_TEST_POSTGRES_URL).")
            }
            ownTables = url
        }
        var trace: (@Sendable (String) -> Void)?
        if arguments.flag("trace") {
            trace = { line in FileHandle.standardError.write(Data("  · \(line)\n".utf8)) }
        }
        try arguments.checkAllUsed()
        guard arguments.positional.isEmpty else { throw UsageError("simulate takes no words, only options.") }

        var faults: [FaultKind: Int] = [:]
        var writes = 0
        var violations = 0
        var failing: [String] = []
        let started = Date()
        defer { Simulation.dropOwnTableDatabases() }
        for offset in 0..<UInt64(seeds) {
            let config = SimulationConfig(
                seed: first + offset, devices: devices, operations: operations, faultRate: faultRate, liveChannels: live,
                durableCommits: durableCommits, mergeFields: mergeFields, ownTables: ownTables, trace: trace)
            let result: SimulationResult
            do {
                result = try await Simulation.run(config)
            } catch {
                // A run that cannot finish is a finding of its seed, not the end of the others.
                violations += 1
                failing.append(config.replayCommand)
                Terminal.note("seed \(config.seed) could not finish: \(error)")
                Terminal.note("  replay: \(config.replayCommand)")
                continue
            }
            writes += result.writes
            for (kind, count) in result.faults { faults[kind, default: 0] += count }
            if !result.violations.isEmpty {
                violations += result.violations.count
                failing.append(config.replayCommand)
                Terminal.note("seed \(config.seed) broke an invariant:")
                for violation in result.violations.prefix(5) { Terminal.note("  \(violation)") }
                Terminal.note("  replay: \(config.replayCommand)")
            }
            if seeds >= 20, (offset + 1) % UInt64(max(1, seeds / 10)) == 0 {
                Terminal.note("… \(offset + 1) of \(seeds) seeds")
            }
        }
        let faultText = faults.keys.sorted().map { "\($0.rawValue)=\(faults[$0]!)" }.joined(separator: " ")
        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        print("seeds run: \(seeds), devices: \(devices), writes: \(writes), faults: \(faults.values.reduce(0, +)) (\(faultText)), violations: \(violations), time: \(seconds) s")
        if !failing.isEmpty {
            throw CommandFailure("\(failing.count) seeds broke an invariant; replay the first with: \(failing[0])")
        }
    }
}
