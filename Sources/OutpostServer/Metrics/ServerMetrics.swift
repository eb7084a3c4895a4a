import Foundation
import OutpostCore

/// What `GET /metrics` reports, in Prometheus' text format: counters and
/// latency histograms kept in memory by this process since it started
/// (Prometheus computes rates from successive scrapes; several servers are
/// summed by it, not here).
package final class ServerMetrics: Sendable {
    /// Upper bounds of the latency buckets, in seconds.
    static let buckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    struct Histogram: Sendable {
        var counts = [UInt64](repeating: 0, count: ServerMetrics.buckets.count)
        var sum = 0.0
        var count: UInt64 = 0

        mutating func observe(_ seconds: Double) {
            if let index = ServerMetrics.buckets.firstIndex(where: { seconds <= $0 }) { counts[index] += 1 }
            sum += seconds
            count += 1
        }
    }

    private struct State: Sendable {
        var requests: [String: UInt64] = [:]  // "route|status"
        var latency: [String: Histogram] = [:]  // route
        var mutations: [String: UInt64] = [:]  // result status
        var pulledRecords: UInt64 = 0
        var pages: [String: UInt64] = [:]  // primary / replica
        var blobUploads: [String: UInt64] = [:]  // result
        /// Body bytes of blob uploads stored, resent ones included.
        var blobBytesReceived: UInt64 = 0
        var transactions: [String: Histogram] = [:]  // read / write
        var transactionFailures: [String: UInt64] = [:]
    }

    private let state = Locked(State())
    private let started = Date()
    /// Minute by minute, for the console's activity feed.
    package let activity = ActivityLog()

    package init() {}

    /// One answered request; `route` is a fixed name (see ``route(method:path:query:)``).
    func request(route: String, status: Int, seconds: Double) {
        state.withLock { state in
            state.requests["\(route)|\(status)", default: 0] += 1
            state.latency[route, default: Histogram()].observe(seconds)
        }
        activity.answered(route: route, status: status)
    }

    func mutations(_ statuses: [MutationStatus]) {
        guard !statuses.isEmpty else { return }
        activity.applied(mutations: statuses.filter { $0 == .applied }.count)
        state.withLock { state in
            for status in statuses { state.mutations[status.rawValue, default: 0] += 1 }
        }
    }

    func pulled(records: Int) {
        guard records > 0 else { return }
        activity.pulled(records: records)
        state.withLock { $0.pulledRecords += UInt64(records) }
    }

    /// One blob upload request answered: `complete`, `partial`, or the refusal's code.
    func blobUpload(_ result: String) {
        state.withLock { $0.blobUploads[result, default: 0] += 1 }
    }

    /// Body bytes of an upload stored (a resumed upload that sent a byte
    /// twice would show here as more than the blobs' sizes).
    func blobBytesReceived(_ count: Int) {
        state.withLock { $0.blobBytesReceived += UInt64(count) }
    }

    /// Blob upload requests by result (tests look).
    package var blobUploadResults: [String: UInt64] { state.withLock { $0.blobUploads } }

    /// Blob body bytes stored so far (tests look).
    package var blobBytesReceivedTotal: UInt64 { state.withLock { $0.blobBytesReceived } }

    /// Pull pages read so far from `source` (tests look).
    package func pages(from source: String) -> UInt64 { state.withLock { $0.pages[source] ?? 0 } }

    /// A pull page read from the primary or the read replica.
    func page(from source: String) {
        state.withLock { $0.pages[source, default: 0] += 1 }
    }

    func transaction(_ kind: String, seconds: Double, failed: Bool) {
        state.withLock { state in
            state.transactions[kind, default: Histogram()].observe(seconds)
            if failed { state.transactionFailures[kind, default: 0] += 1 }
        }
    }

    /// The label a request is counted under: the endpoint with its
    /// variable parts named, never the path itself (ids would make a new
    /// series per record).
    static func route(method: String, path: String, query: [String: String]) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        switch path {
        case "/metrics", "/v1/push", "/v1/stream", "/v1/health", "/v1/ready", "/v1/scope", "/v1/search": return path
        case "/v1/pull": return query["wait"] != nil ? "/v1/pull?wait" : path
        default: break
        }
        if path == "/admin" || path.hasPrefix("/admin/") { return path.hasPrefix("/admin/api/") ? "/admin/api" : "/admin" }
        if parts.count == 4, parts[1] == "v1", parts[2] == "mutations" { return "/v1/mutations/{id}" }
        if parts.count == 5, parts[1] == "v1", parts[2] == "records" { return "/v1/records/{collection}/{uuid}" }
        if parts.count == 6, parts[1] == "v1", parts[2] == "records", parts[5] == "assign" {
            return "/v1/records/{collection}/{uuid}/assign"
        }
        return "other"
    }

    /// Readings taken at scrape time rather than counted.
    struct Gauges {
        var longPolls = 0
        var streams = 0
        var database: DatabaseWaits?
        /// Complete blobs held, and their bytes.
        var blobs: (count: Int64, bytes: Int64)?
        /// What devices heard from lately said of their outboxes.
        var outboxes = DeviceOutboxes.Summary()
    }

    /// The text exposition format, version 0.0.4.
    func exposition(_ gauges: Gauges) -> String {
        let state = self.state.current
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, _ labels: [(String, String)], _ value: String) {
            let text = labels.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }.joined(separator: ",")
            out += labels.isEmpty ? "\(name) \(value)\n" : "\(name){\(text)} \(value)\n"
        }
        func histogram(_ name: String, _ label: String, _ histograms: [String: Histogram]) {
            for (key, histogram) in histograms.sorted(by: { $0.key < $1.key }) {
                var cumulative: UInt64 = 0
                for (index, bound) in Self.buckets.enumerated() {
                    cumulative += histogram.counts[index]
                    sample("\(name)_bucket", [(label, key), ("le", Self.number(bound))], String(cumulative))
                }
                sample("\(name)_bucket", [(label, key), ("le", "+Inf")], String(histogram.count))
                sample("\(name)_sum", [(label, key)], Self.number(histogram.sum))
                sample("\(name)_count", [(label, key)], String(histogram.count))
            }
        }

        family("outpost_http_requests_total", "counter", "Requests answered, by route and status.")
        for (key, count) in state.requests.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "|", maxSplits: 1).map(String.init)
            sample("outpost_http_requests_total", [("route", parts[0]), ("status", parts[1])], String(count))
        }
        family(
            "outpost_http_request_duration_seconds", "histogram",
            "Time from a request's arrival to its answer being queued (a long poll's wait included).")
        histogram("outpost_http_request_duration_seconds", "route", state.latency)

        family("outpost_mutations_total", "counter", "Pushed mutations, by result status.")
        for status in MutationStatus.allCases {
            sample("outpost_mutations_total", [("status", status.rawValue)], String(state.mutations[status.rawValue] ?? 0))
        }
        family("outpost_pull_records_total", "counter", "Changes handed out by pulls, long polls and streams.")
        sample("outpost_pull_records_total", [], String(state.pulledRecords))

        family(
            "outpost_pull_pages_total", "counter",
            "With --read-database: pull pages read from the replica, or from the primary while the replica had not replayed the newest commit heard.")
        for source in ["primary", "replica"] {
            sample("outpost_pull_pages_total", [("source", source)], String(state.pages[source] ?? 0))
        }
        family("outpost_live_connections", "gauge", "Live connections waiting now, by kind.")
        sample("outpost_live_connections", [("kind", "long_poll")], String(gauges.longPolls))
        sample("outpost_live_connections", [("kind", "stream")], String(gauges.streams))

        family(
            "outpost_db_transaction_duration_seconds", "histogram",
            "Database transactions, by kind, from BEGIN to COMMIT or ROLLBACK (row-lock waits included).")
        histogram("outpost_db_transaction_duration_seconds", "kind", state.transactions)
        family("outpost_db_transaction_failures_total", "counter", "Database transactions that failed, by kind.")
        for kind in ["read", "write"] {
            sample("outpost_db_transaction_failures_total", [("kind", kind)], String(state.transactionFailures[kind] ?? 0))
        }
        if let waits = gauges.database {
            family(
                "outpost_db_lock_wait_seconds_total", "counter",
                "Time transactions waited before running: for a pooled connection, and with --write-lock schema for the write lock.")
            sample("outpost_db_lock_wait_seconds_total", [], Self.number(waits.seconds))
            family(
                "outpost_db_write_retries_total", "counter",
                "Write transactions run again after meeting a concurrent one (deadlock, same new record, newer version).")
            sample("outpost_db_write_retries_total", [], String(waits.retries))
        }

        family("outpost_blob_uploads_total", "counter", "Blob upload requests, by result: complete, partial, or the refusal's code.")
        for (result, count) in state.blobUploads.sorted(by: { $0.key < $1.key }) {
            sample("outpost_blob_uploads_total", [("result", result)], String(count))
        }
        family("outpost_blob_received_bytes_total", "counter", "Body bytes of blob uploads stored, bytes sent again included.")
        sample("outpost_blob_received_bytes_total", [], String(state.blobBytesReceived))
        if let blobs = gauges.blobs {
            family("outpost_blobs_stored", "gauge", "Complete blobs (attachments) the database holds.")
            sample("outpost_blobs_stored", [], String(blobs.count))
            family("outpost_blob_stored_bytes", "gauge", "Bytes of the complete blobs the database holds.")
            sample("outpost_blob_stored_bytes", [], String(blobs.bytes))
        }

        family(
            "outpost_device_outboxes_reporting", "gauge",
            "Devices that reported their outbox (Outpost-Outbox) to this server in the last 10 minutes.")
        sample("outpost_device_outboxes_reporting", [], String(gauges.outboxes.devices))
        family("outpost_device_outbox_unsent_max", "gauge", "The most unconfirmed changes one of those devices holds.")
        sample("outpost_device_outbox_unsent_max", [], String(gauges.outboxes.largestUnsent))
        family(
            "outpost_device_outbox_oldest_seconds_max", "gauge",
            "Age of the oldest unconfirmed change on any of those devices (0 when none holds one).")
        sample("outpost_device_outbox_oldest_seconds_max", [], String(gauges.outboxes.oldestSeconds))
        family(
            "outpost_device_outboxes_stuck", "gauge",
            "Those devices whose oldest unconfirmed change is over an hour old (each is logged once an hour).")
        sample("outpost_device_outboxes_stuck", [], String(gauges.outboxes.stuck))

        family("outpost_process_start_time_seconds", "gauge", "When this server process started, in Unix time.")
        sample("outpost_process_start_time_seconds", [], Self.number(started.timeIntervalSince1970))
        if let resident = Self.residentBytes() {
            family("outpost_process_resident_memory_bytes", "gauge", "Resident memory of this server process.")
            sample("outpost_process_resident_memory_bytes", [], String(resident))
        }
        return out
    }

    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    static func escaped(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// From /proc on Linux, from the Mach task's basic info on macOS; nil elsewhere.
    static func residentBytes() -> Int? {
        #if canImport(Darwin)
        var info = mach_task_basic_info()
        var count = mach_msg_type_number_t(MemoryLayout<mach_task_basic_info>.size / MemoryLayout<natural_t>.size)
        let status = withUnsafeMutablePointer(to: &info) {
            $0.withMemoryRebound(to: integer_t.self, capacity: Int(count)) {
                task_info(mach_task_self_, task_flavor_t(MACH_TASK_BASIC_INFO), $0, &count)
            }
        }
        return status == KERN_SUCCESS ? Int(info.resident_size) : nil
        #else
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
            let pages = text.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
        #endif
    }
}

/// Waits a database counts itself (PostgreSQL: for a connection, for the
/// schema lock, between retries), read at scrape time.
public struct DatabaseWaits: Sendable {
    /// Seconds waited in all.
    public var seconds: Double = 0
    /// Write transactions run again after meeting a concurrent one.
    public var retries: UInt64 = 0
}
