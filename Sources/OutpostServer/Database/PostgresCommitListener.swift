import CLibPQ
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import OutpostCore

/// Commits announced by any server process sharing the database.
public protocol CommitListening: Sendable {
    /// Stops listening (the connection is closed within half a second).
    func stop()
}

/// Hears `NOTIFY`s of commits on a dedicated libpq connection, so a write
/// on one `outpost serve` wakes the waiting connections of every other one
/// on the same PostgreSQL.
///
/// Its own thread waits on the connection's socket (`poll`, half a second at
/// a time, so `stop()` is prompt). A lost connection is made again with a
/// growing pause. Notifications sent while no `LISTEN` was active are gone,
/// so the first thing heard on every connection, the first one included, is
/// "everything may have changed": the server answers requests from the
/// moment it starts, and under load its first `LISTEN` came after another
/// server's commit that a stream opened here was waiting for (seen in a
/// clean-clone run: the stream heard nothing for 50 s).
final class PostgresCommitListener: CommitListening {
    /// The payload that means "wake every connection" (after a gap, or a
    /// commit too large to describe).
    static let everything = "*"

    private let url: String
    private let redactedURL: String
    private let onPayload: @Sendable (String) -> Void
    private let stopped = Locked(false)
    private let log: @Sendable (String) -> Void

    init(url: String, redactedURL: String, log: @escaping @Sendable (String) -> Void, onPayload: @escaping @Sendable (String) -> Void) {
        self.url = url
        self.redactedURL = redactedURL
        self.onPayload = onPayload
        self.log = log
        _ = Self.stopsAtExit
        Self.running.withLock { $0[ObjectIdentifier(self)] = self }
        Self.threads.enter()
        let thread = Thread { [self] in
            run()
            Self.running.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(self)) }
            Self.threads.leave()
        }
        thread.name = "outpost.commit-listener"
        thread.start()
    }

    func stop() { stopped.withLock { $0 = true } }

    // A one-shot command (`outpost token issue` on PostgreSQL) returns while
    // its server's listener may be in the middle of a connection's SCRAM
    // exchange; the process's exit then tears OpenSSL down under that thread
    // (a crash seen in libcrypto). So the exit first stops every listener and
    // waits, briefly, for their threads: registered after libpq's first
    // connection set OpenSSL up, this runs before OpenSSL's own exit handler.
    private static let running = Locked<[ObjectIdentifier: PostgresCommitListener]>([:])
    private static let threads = DispatchGroup()
    private static let stopsAtExit: Void = {
        atexit {
            for listener in PostgresCommitListener.running.withLock({ Array($0.values) }) { listener.stop() }
            _ = PostgresCommitListener.threads.wait(timeout: .now() + 2)
        }
    }()

    private var isStopped: Bool { stopped.current }

    private func run() {
        var pause: UInt32 = 200_000
        while !isStopped {
            guard let connection = connect() else {
                usleep(pause)
                pause = min(pause * 2, 5_000_000)
                continue
            }
            pause = 200_000
            onPayload(Self.everything)
            listen(on: connection)
            PQfinish(connection)
        }
    }

    /// A connection listening on this schema's channel, or nil (logged).
    private func connect() -> OpaquePointer? {
        guard let connection = PostgresConnect.open(url, name: "outpost listen") else { return nil }
        guard PQstatus(connection) == CONNECTION_OK else {
            log("commit listener: cannot connect to PostgreSQL at \(redactedURL): \(String(cString: PQerrorMessage(connection)))")
            PQfinish(connection)
            return nil
        }
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        let schemaResult = PQexec(connection, "SELECT current_schema()")
        defer { PQclear(schemaResult) }
        guard let schemaResult, PQresultStatus(schemaResult) == PGRES_TUPLES_OK, PQntuples(schemaResult) == 1,
            let value = PQgetvalue(schemaResult, 0, 0)
        else {
            PQfinish(connection)
            return nil
        }
        let channel = Self.channel(schema: String(cString: value))
        let listenResult = PQexec(connection, "LISTEN \"\(channel)\"")
        defer { PQclear(listenResult) }
        guard let listenResult, PQresultStatus(listenResult) == PGRES_COMMAND_OK else {
            PQfinish(connection)
            return nil
        }
        return connection
    }

    private func listen(on connection: OpaquePointer) {
        let socket = PQsocket(connection)
        while !isStopped {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 500)
            if ready < 0 && errno != EINTR { return }
            guard ready > 0 else { continue }
            guard PQconsumeInput(connection) == 1 else {
                log("commit listener: lost the connection to PostgreSQL at \(redactedURL); reconnecting")
                return
            }
            while let notification = PQnotifies(connection) {
                let payload = notification.pointee.extra.map { String(cString: $0) } ?? Self.everything
                PQfreemem(notification)
                onPayload(payload)
            }
        }
    }

    /// The channel of one schema: deployments sharing a database in
    /// different schemas do not wake each other.
    static func channel(schema: String) -> String { "outpost_commits_" + schema.prefix(40) }
}

extension CommitNotice {
    /// The notice as a `NOTIFY` payload (under PostgreSQL's 8000 bytes, or
    /// "everything"), tagged with the process that committed it.
    func payload(origin: String) -> String {
        struct Wire: Encodable {
            var o: String
            var c: [String]
            var u: [String]
            var t: [String]
        }
        let text = (try? WireCoding.encode(Wire(o: origin, c: collections.sorted(), u: owners.sorted(), t: teams.sorted())))
            .map { String(decoding: $0, as: UTF8.self) }
        guard let text, text.utf8.count < 7_900 else { return PostgresCommitListener.everything }
        return text
    }

    /// Reads a payload; nil for one this process sent itself. "Everything"
    /// (or one that cannot be read) wakes every connection.
    init?(payload: String, ignoringOrigin origin: String) {
        struct Wire: Decodable {
            var o: String
            var c: [String]
            var u: [String]
            var t: [String]
        }
        guard payload != PostgresCommitListener.everything,
            let wire = try? WireCoding.decode(Wire.self, from: Data(payload.utf8))
        else {
            self.init(wakesAll: true)
            return
        }
        guard wire.o != origin else { return nil }
        self.init(collections: Set(wire.c), owners: Set(wire.u), teams: Set(wire.t))
    }
}
