// swift-tools-version:6.0
import PackageDescription

// An app-side program that depends on Outpost by path, as an app would:
// it imports only Outpost and OutpostTesting.
let package = Package(
    name: "FieldNotes",
    platforms: [.macOS(.v14), .iOS(.v17)],
    dependencies: [.package(name: "Outpost", path: "../..")],
    targets: [
        .executableTarget(
            name: "FieldNotes",
            dependencies: [
                .product(name: "Outpost", package: "Outpost"),
                .product(name: "OutpostTesting", package: "Outpost"),
            ]
        )
    ]
)
