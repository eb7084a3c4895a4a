// swift-tools-version:6.2
// 6.2 (Xcode 26): no older compiler builds or checks this package, so none is claimed.
import PackageDescription

/// One set of settings for every Swift target, so no module drifts out of
/// Swift 6 language mode or picks up its own flags.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

var package = Package(
    name: "Outpost",
    defaultLocalization: "en",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "Outpost", targets: ["Outpost"]),
        .library(name: "OutpostServer", targets: ["OutpostServer"]),
        .library(name: "OutpostTesting", targets: ["OutpostTesting"]),
        .library(name: "OutpostSimulation", targets: ["OutpostSimulation"]),
        .executable(name: "outpost", targets: ["outpost"]),
    ],
    targets: [
        // C libraries from the system. On Apple platforms the client uses the
        // SDK's SQLite3 module instead of CSQLite.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"]), .brew(["libmicrohttpd"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // Deflate for push bodies (Linux; see OutpostCore's BodyCompression).
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // libcurl's multi interface: the client's HTTP transport on Linux (CurlTransport).
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        // Whole-buffer deflate for the server's compressed answers: about 1.7x zlib's speed at its bytes (docs/benchmarks.md).
        .systemLibrary(
            name: "CLibDeflate",
            pkgConfig: "libdeflate",
            providers: [.apt(["libdeflate-dev"]), .brew(["libdeflate"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),

        // The protocol's JSON error body on the answers libmicrohttpd gives by itself.
        .target(name: "CMicroHTTPDErrorBodies", dependencies: ["CMicroHTTPD"]),

        // TLS certificates for libmicrohttpd's GnuTLS sessions, reloadable while serving.
        .target(name: "CMicroHTTPDTLS", dependencies: ["CMicroHTTPD"], linkerSettings: [.linkedLibrary("gnutls")]),

        // Wire types and pure logic: no I/O, shared by client and server.
        .target(
            name: "OutpostCore",
            dependencies: [
                .target(name: "CZlib", condition: .when(platforms: [.linux, .android])),
                // Whole answers inflated in one call on Linux (AnswerInflater); Apple's URLSession decodes its own.
                .target(name: "CLibDeflate", condition: .when(platforms: [.linux])),
            ]
        ),

        // A small SQLite layer over the C API, used by the client store and the server.
        .target(
            name: "OutpostSQLite",
            dependencies: [.target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .windows]))]
        ),

        // The client library: local store, durable outbox, (later) sync engine.
        // AES-GCM for payloads at rest: CryptoKit on Apple platforms, OpenSSL elsewhere.
        .target(
            name: "Outpost",
            dependencies: [
                "OutpostCore", "OutpostSQLite", .target(name: "COpenSSL", condition: .when(platforms: [.linux, .android])),
                .target(name: "CCurl", condition: .when(platforms: [.linux, .android])),
            ],
            // The status sentences in each language (Localizable.strings).
            resources: [.process("Resources")]
        ),

        // The sync server behind `outpost serve`.
        .target(
            name: "OutpostServer",
            dependencies: [
                "OutpostCore", "OutpostSQLite", "CMicroHTTPD", "CMicroHTTPDErrorBodies", "CMicroHTTPDTLS", "CLibPQ", "CLibDeflate",
                // zlib for the streams' events, deflated once each and shared (Live/EventDeflater).
                .target(name: "CZlib", condition: .when(platforms: [.linux, .android])),
                // JWT signatures (RS256, ES256); the server needs OpenSSL's libcrypto on every platform.
                "COpenSSL",
            ],
            // The administrator's console, compiled into the binary: nothing to fetch or deploy beside it.
            resources: [
                .embedInCode("Console/Assets/console.html"), .embedInCode("Console/Assets/console.css"),
                .embedInCode("Console/Assets/console.js"), .embedInCode("Console/Assets/console-strings.js"),
            ]),

        // A SQLite VFS that fails writes, syncs or reads on a schedule: the
        // device's full disk and I/O errors, for tests and the simulation.
        .target(
            name: "CFaultVFS",
            dependencies: [.target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .windows]))]
        ),

        // Test support shipped as a product: controllable clock, ids, temp stores.
        .target(name: "OutpostTesting", dependencies: ["OutpostCore", "Outpost"]),

        // The deterministic multi-device simulation, the invariant checker and
        // the chaos proxy: the real client and the real server together.
        .target(
            name: "OutpostSimulation", dependencies: ["Outpost", "OutpostCore", "OutpostServer", "OutpostTesting", "CFaultVFS"]),

        .executableTarget(
            name: "outpost",
            dependencies: ["Outpost", "OutpostCore", "OutpostServer", "OutpostTesting", "OutpostSimulation"]
        ),

        // The code of the article "Syncing in the background", type-checked for iOS (empty elsewhere).
        .target(name: "BackgroundSyncExamples", dependencies: ["Outpost"]),

        // A child process for the crash tests: writes through the store until killed.
        .executableTarget(name: "OutpostCrashWriter", dependencies: ["Outpost", "OutpostCore"]),
        // A second process on one store file (an app extension), for the two-process tests.
        .executableTarget(name: "OutpostExtensionWriter", dependencies: ["Outpost", "OutpostCore"]),

        .testTarget(
            name: "OutpostSimulationTests",
            dependencies: ["OutpostSimulation", "Outpost", "OutpostCore", "OutpostServer", "OutpostTesting", "outpost"]
        ),
        .testTarget(name: "OutpostCoreTests", dependencies: ["OutpostCore", "OutpostTesting"]),
        .testTarget(name: "OutpostServerTests", dependencies: ["OutpostServer", "OutpostCore", "OutpostSQLite", "OutpostTesting", "COpenSSL", "outpost"]),
        .testTarget(
            name: "OutpostTests",
            dependencies: ["Outpost", "OutpostCore", "OutpostServer", "OutpostTesting", "OutpostSimulation", "OutpostCrashWriter", "OutpostExtensionWriter"]
        ),
    ]
)

for target in package.targets where target.type != .system && target.name != "CFaultVFS" {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
