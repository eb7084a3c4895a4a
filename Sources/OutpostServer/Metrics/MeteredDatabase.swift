import Foundation

/// A server database that times every transaction for `/metrics`, and
/// otherwise passes everything through.
final class MeteredDatabase: ServerDatabase {
    let inner: any ServerDatabase
    private let metrics: ServerMetrics

    init(_ inner: any ServerDatabase, metrics: ServerMetrics) {
        self.inner = inner
        self.metrics = metrics
    }

    var dialect: SQLDialect { inner.dialect }
    var waits: DatabaseWaits? { inner.waits }

    func write<T>(_ body: (any SQLExecutor) throws -> T) throws -> T {
        try timed("write") { try inner.write(body) }
    }

    func read<T>(_ body: (any SQLExecutor) throws -> T) throws -> T {
        try timed("read") { try inner.read(body) }
    }

    func close() { inner.close() }

    func announce(_ payload: String, in sql: any SQLExecutor) throws { try inner.announce(payload, in: sql) }

    func listenForCommits(
        log: @escaping @Sendable (String) -> Void, _ onPayload: @escaping @Sendable (String) -> Void
    ) -> (any CommitListening)? {
        inner.listenForCommits(log: log, onPayload)
    }

    private func timed<T>(_ kind: String, _ body: () throws -> T) throws -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            let result = try body()
            metrics.transaction(kind, seconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, failed: false)
            return result
        } catch {
            metrics.transaction(kind, seconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, failed: true)
            throw error
        }
    }
}
