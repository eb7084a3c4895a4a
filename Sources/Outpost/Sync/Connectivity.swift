import Foundation
import OutpostCore

/// What the device can do with the network right now.
public enum ConnectivityState: String, Sendable, Equatable, Codable {
    /// At start, before any signal: never shown as an error.
    case unknown
    /// Recent requests to the server succeeded in good time.
    case online
    /// Connected, but requests are slow or failing (Wi-Fi with no internet,
    /// a captive portal, an overloaded server).
    case degraded
    /// No usable network path.
    case offline
}

/// What the operating system says about the network path. A hint only: both
/// values may be unknown (nil), as NetInfo's are, and the real outcome of
/// requests decides.
public struct PathHint: Sendable, Equatable {
    /// Whether the OS sees any network path; nil when it does not say.
    public var isConnected: Bool?
    /// Whether the OS believes that path reaches the internet; nil when unknown.
    public var isInternetReachable: Bool?
    /// A metered path (mobile data); informational.
    public var isExpensive: Bool

    /// Creates a hint from what the OS reports; unknown values stay nil.
    public init(isConnected: Bool?, isInternetReachable: Bool? = nil, isExpensive: Bool = false) {
        self.isConnected = isConnected
        self.isInternetReachable = isInternetReachable
        self.isExpensive = isExpensive
    }
}

/// A source of path hints: `NWPathMonitor` on Apple platforms, a hint source
/// the app or a test drives elsewhere.
public protocol PathMonitor: Sendable {
    /// A stream of hints, one for each network change the monitor sees.
    func hints() -> AsyncStream<PathHint>
}

/// A path monitor driven by hand: on Linux (no OS monitor) and in tests.
public final class ManualPathMonitor: PathMonitor, Sendable {
    /// The open streams, and the latest hint a new stream starts with.
    private struct Listeners {
        var continuations: [UUID: AsyncStream<PathHint>.Continuation] = [:]
        var latest: PathHint?
    }

    private let listeners: Locked<Listeners>

    /// Creates a monitor; `initial`, when given, is the first hint every new stream receives.
    public init(initial: PathHint? = nil) { listeners = Locked(Listeners(latest: initial)) }

    /// A stream that starts with the latest hint sent, if any, then every hint passed to `send(_:)`.
    public func hints() -> AsyncStream<PathHint> {
        let (stream, continuation) = AsyncStream.makeStream(of: PathHint.self, bufferingPolicy: .bufferingNewest(8))
        let id = UUID()
        listeners.withLock { listeners in
            listeners.continuations[id] = continuation
            if let latest = listeners.latest { continuation.yield(latest) }
        }
        continuation.onTermination = { [weak self] _ in
            self?.listeners.withLock { _ = $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Reports a new path, as the OS would on a network change.
    public func send(_ hint: PathHint) {
        let targets = listeners.withLock { listeners in
            listeners.latest = hint
            return Array(listeners.continuations.values)
        }
        for continuation in targets { continuation.yield(hint) }
    }
}

#if canImport(Network)
import Network

/// `NWPathMonitor` as a hint source.
public final class SystemPathMonitor: PathMonitor, @unchecked Sendable {
    // @unchecked Sendable: NWPathMonitor delivers on its own serial queue; we only start it once per stream.
    /// A monitor whose every stream watches the OS's network path.
    public init() {}

    /// A stream of hints: the current path first, then one per change, until the stream ends.
    public func hints() -> AsyncStream<PathHint> {
        AsyncStream { continuation in
            let monitor = NWPathMonitor()
            monitor.pathUpdateHandler = { path in
                continuation.yield(
                    PathHint(
                        isConnected: path.status != .unsatisfied, isInternetReachable: path.status == .satisfied ? nil : false,
                        isExpensive: path.isExpensive))
            }
            continuation.onTermination = { _ in monitor.cancel() }
            monitor.start(queue: DispatchQueue(label: "outpost.path-monitor"))
        }
    }
}
#endif

extension SyncEngine {
    /// The engine's path monitor unless the app gives one: the OS's where it
    /// has a monitor (Network framework); none elsewhere, where the app or a
    /// test sends hints itself.
    @usableFromInline
    package static func osPathMonitor() -> (any PathMonitor)? {
        #if canImport(Network)
        return SystemPathMonitor()
        #else
        return nil
        #endif
    }
}

/// Turns hints and request outcomes into a `ConnectivityState`.
///
/// The OS hint can only make things look worse (no path = offline); only a
/// real answer from the server makes the state `online`. A request that
/// could not be sent while the OS claims a connection means "connected but
/// no internet": degraded, not offline.
package struct ConnectivityModel: Sendable, Equatable {
    /// The current connectivity, updated by every hint and request outcome; `unknown` until the first one.
    package private(set) var state: ConnectivityState = .unknown
    /// The last hint received from the OS, or nil if none has arrived yet.
    package private(set) var hint: PathHint?
    /// Requests slower than this make the state degraded.
    package var slowThreshold: Duration

    /// Creates a model in the `unknown` state; requests slower than `slowThreshold` count as degraded.
    package init(slowThreshold: Duration = .seconds(3)) {
        self.slowThreshold = slowThreshold
    }

    /// How a request ended, as far as connectivity is concerned.
    package enum Outcome: Sendable, Equatable {
        /// The server answered after `latency`: online, or degraded if slower than the threshold.
        case answered(latency: Duration)
        /// 5xx or 429: the network works, the service is struggling.
        case serverStruggling
        /// The request never reached the server (no network, host not found).
        case notSent
        /// The request may have reached the server, but no answer came in time.
        case noAnswer
    }

    /// A new OS hint. Returns true when it means the network came back.
    @discardableResult
    package mutating func receive(_ hint: PathHint) -> Bool {
        let wasOff = state == .offline
        self.hint = hint
        if hint.isConnected == false {
            state = .offline
        } else if hint.isConnected == true, hint.isInternetReachable == false {
            state = .degraded
        } else if wasOff {
            // A path is back; only a request will say whether it works.
            state = .unknown
        }
        return wasOff && hint.isConnected != false
    }

    /// A request's outcome. Returns true when it means the network came back.
    @discardableResult
    package mutating func record(_ outcome: Outcome) -> Bool {
        let wasDown = state == .offline || state == .degraded
        switch outcome {
        case .answered(let latency):
            state = latency > slowThreshold ? .degraded : .online
        case .serverStruggling, .noAnswer:
            state = hint?.isConnected == false ? .offline : .degraded
        case .notSent:
            state = hint?.isConnected == true ? .degraded : .offline
        }
        return wasDown && state == .online
    }
}
