import Foundation
import Outpost
import Testing

/// Which path monitor an engine uses when the app gives none.
@Suite("Default path monitor", .timeLimit(.minutes(1)))
struct PathMonitorDefaultTests {
    @Test func theOSMonitorWhereThereIsOne() {
        let monitor = SyncEngine.osPathMonitor()
        #if canImport(Network)
        #expect(monitor is SystemPathMonitor)
        #else
        #expect(monitor == nil, "no OS monitor here: the app sends hints")
        #endif
    }
}
