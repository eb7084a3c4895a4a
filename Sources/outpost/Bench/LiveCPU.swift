import Foundation
import OutpostCore
import OutpostSQLite
import OutpostTesting
#if canImport(Glibc)
import Glibc
#endif

/// The CPU a live benchmark's process used, split between the server's
/// threads (libmicrohttpd's workers) and everything else: the device
/// engines, their stores and their transports.
struct LiveCPU {
    /// Every thread's, exited ones included (getrusage).
    var process: Double
    /// The server's worker threads' (zero where threads cannot be told apart).
    var server: Double

    var engines: Double { process - server }

    static func now() -> LiveCPU {
        LiveCPU(process: Bench.ownCPUSeconds(), server: serverThreadSeconds())
    }

    static func - (later: LiveCPU, earlier: LiveCPU) -> LiveCPU {
        LiveCPU(process: later.process - earlier.process, server: later.server - earlier.server)
    }

    /// The CPU seconds of this process's threads named like libmicrohttpd's
    /// workers (they live as long as the server, so none is missed by exiting).
    static func serverThreadSeconds() -> Double {
        #if os(Linux)
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return 0 }
        var ticks = 0.0
        for task in tasks {
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8) else { continue }
            if let sample = Bench.statTicks(stat), sample.name.hasPrefix("MHD") { ticks += sample.ticks }
        }
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
        #else
        return 0
        #endif
    }
}

/// The floor under a store's commit of a live page: one row committed
/// into each of `files` SQLite files (WAL), on `threads` threads, with
/// nothing else around it. Synced as the stores sync, the disk's flush
/// is most of it and many threads overlap their flushes (the stores'
/// queues do); unsynced, two threads are what two cores can commit.
enum LiveCommitFloor {
    struct Figures {
        /// Wall time until every file committed its row, per round (ms).
        var allCommittedMilliseconds: [Double]
        /// CPU per commit (ms).
        var cpuMillisecondsPerCommit: Double
    }

    static func measure(files: Int, rounds: Int, threads: Int, durability: Durability) throws -> Figures {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-commit-floor")
        let files = Files(try (0..<files).map { index in
            let connection = try SQLiteConnection(path: directory.path("f\(index).sqlite"), durability: durability)
            try connection.execute("CREATE TABLE people (uuid TEXT PRIMARY KEY, data TEXT NOT NULL)")
            return connection
        })
        let connections = files.connections
        let shares = (0..<threads).map { thread in Array(connections.indices.filter { $0 % threads == thread }) }
        let data = Bench.recordData(1)
        var walls: [Double] = []
        let cpuBefore = Bench.ownCPUSeconds()
        for _ in 0..<rounds {
            let failures = Locked(0)
            let started = DispatchTime.now().uptimeNanoseconds
            DispatchQueue.concurrentPerform(iterations: shares.count) { thread in
                for index in shares[thread] {
                    let connection = files.connections[index]
                    do {
                        try connection.transaction {
                            _ = try connection.run(
                                "INSERT INTO people (uuid, data) VALUES (?, ?)", [.text(UUID().uuidString), .text(data)])
                        }
                    } catch {
                        failures.withLock { $0 += 1 }
                    }
                }
            }
            walls.append(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6)
            if failures.current > 0 { throw BenchFailure("\(failures.current) commits of the floor failed") }
        }
        let cpu = Bench.ownCPUSeconds() - cpuBefore
        connections.forEach { $0.close() }
        return Figures(allCommittedMilliseconds: walls, cpuMillisecondsPerCommit: cpu * 1000 / Double(connections.count * rounds))
    }

    /// The files' connections; each thread uses only its share.
    private final class Files: @unchecked Sendable {
        let connections: [SQLiteConnection]
        init(_ connections: [SQLiteConnection]) { self.connections = connections }
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
