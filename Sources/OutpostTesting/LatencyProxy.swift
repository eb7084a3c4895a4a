#if os(Linux) || os(macOS)
import Foundation

/// A TCP proxy that delivers every byte a fixed delay after it arrived, in
/// both directions: what a database on another host does to each round
/// trip, without kernel network emulation (which needs root). Bytes keep
/// their order; throughput is not limited.
///
/// It is a ``LinkRelay`` whose link has no bandwidth limit, only its
/// round trip.
public final class LatencyProxy: Sendable {
    private let relay: LinkRelay

    /// The port it listens on, on 127.0.0.1.
    public var port: UInt16 { relay.port }

    /// Listens on a free port of 127.0.0.1 and forwards to
    /// `127.0.0.1:targetPort`, adding `roundTrip` to every round trip (half
    /// each way).
    public init(targetPort: UInt16, roundTrip: Duration) throws {
        relay = try LinkRelay(targetPort: targetPort, link: LinkRelay.Link(bitsPerSecond: .infinity, roundTrip: roundTrip))
    }

    /// Stops accepting; open connections end when either side closes.
    public func stop() { relay.stop() }
}
#endif
