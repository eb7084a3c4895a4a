import Foundation
import OutpostCore

/// What this server process did minute by minute (pushes, pulls, changes
/// applied, records sent, errors) over the last hour, and its last errors:
/// the console's activity feed. Kept in memory beside the metrics; with
/// several servers each one shows its own.
package final class ActivityLog: Sendable {
    struct Minute: Sendable {
        var pushes = 0
        var pulls = 0
        var mutations = 0
        var recordsPulled = 0
        var errors = 0
    }

    /// An answer that was not 2xx or 3xx.
    struct ErrorEntry: Sendable {
        var at: Date
        var status: Int
        var code: String?
        var method: String
        var route: String
        var user: String?
        var requestID: String
    }

    private struct State: Sendable {
        var minutes: [Int64: Minute] = [:]
        var errors: [ErrorEntry] = []
    }

    static let keptMinutes: Int64 = 60
    static let keptErrors = 50
    private let state = Locked(State())

    private func update(_ now: Date, _ change: (inout Minute) -> Void) {
        let minute = Int64(now.timeIntervalSince1970 / 60)
        state.withLock { state in
            change(&state.minutes[minute, default: Minute()])
            if state.minutes.count > Self.keptMinutes {
                state.minutes = state.minutes.filter { $0.key > minute - Self.keptMinutes }
            }
        }
    }

    /// One answered request, by its route's fixed name.
    func answered(route: String, status: Int, at now: Date = Date()) {
        update(now) { minute in
            switch route {
            case "/v1/push": minute.pushes += 1
            case "/v1/pull", "/v1/pull?wait", "/v1/stream": minute.pulls += 1
            default: break
            }
            if status >= 400 { minute.errors += 1 }
        }
    }

    func applied(mutations: Int, at now: Date = Date()) { update(now) { $0.mutations += mutations } }

    func pulled(records: Int, at now: Date = Date()) { update(now) { $0.recordsPulled += records } }

    /// An error answer, with its code read from the error body.
    func failed(_ entry: ErrorEntry, body: [UInt8]) {
        var entry = entry
        if entry.code == nil, let object = try? JSONValue.parse(String(decoding: body.prefix(4_096), as: UTF8.self)) {
            let error = object.objectValue?["error"]?.objectValue ?? object.objectValue
            entry.code = error?["code"]?.stringValue
        }
        state.withLock { state in
            state.errors.append(entry)
            if state.errors.count > Self.keptErrors { state.errors.removeFirst(state.errors.count - Self.keptErrors) }
        }
    }

    /// The last `minutes` minutes (oldest first, empty ones included) and the last errors (newest first).
    func report(minutes count: Int64 = 30, now: Date = Date()) -> JSONValue {
        let current = Int64(now.timeIntervalSince1970 / 60)
        let (minutes, errors) = state.withLock { ($0.minutes, $0.errors) }
        let series: [JSONValue] = ((current - count + 1)...current).map { index in
            let minute = minutes[index] ?? Minute()
            return [
                "minute": .string(ServerTimestamp(Date(timeIntervalSince1970: Double(index) * 60)).rawValue),
                "pushes": .int(Int64(minute.pushes)), "pulls": .int(Int64(minute.pulls)),
                "mutations": .int(Int64(minute.mutations)), "records_pulled": .int(Int64(minute.recordsPulled)),
                "errors": .int(Int64(minute.errors)),
            ]
        }
        return [
            "minutes": .array(series),
            "errors": .array(errors.reversed().map { entry in
                [
                    "at": .string(ServerTimestamp(entry.at).rawValue), "status": .int(Int64(entry.status)),
                    "code": .text(entry.code), "method": .string(entry.method), "route": .string(entry.route),
                    "user": .text(entry.user), "request_id": .string(entry.requestID),
                ]
            }),
        ]
    }
}
