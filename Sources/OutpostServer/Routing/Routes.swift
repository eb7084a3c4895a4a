import Foundation
import OutpostCore

/// Every endpoint of the server, and the middleware each group of them
/// shares (run in the order written, outer groups first). A path that no
/// pattern fits is 404; a path that fits with another method is 405.
extension Router {
    static let outpost: Router = {
        var router = Router()

        // Prometheus' scrape.
        router.group(middleware: [MetricsAccess()]) { metrics in
            metrics.get("metrics", use: SyncServer.metricsPage)
        }

        router.group("v1") { v1 in
            // Probes come from load balancers, not apps: no schema, no token.
            v1.get("health", use: SyncServer.health)
            v1.get("ready", use: SyncServer.ready)

            v1.group(middleware: [SchemaCheck()]) { app in
                app.group(middleware: [Authentication(), DeviceSightingNote(), RateLimitCheck()]) { device in
                    device.post("push", use: SyncServer.push)
                    // `?wait=N` makes it a long poll on a socket.
                    device.get("pull", live: SyncServer.pull)
                    device.get("stream", live: SyncServer.stream)
                    device.get("scope", use: SyncServer.scope)
                    device.get("collections", use: SyncServer.collections)
                    device.get("search", use: SyncServer.search)
                    device.get("mutations/:id", use: SyncServer.mutation)
                    device.get("records/:collection/:id", use: SyncServer.record)
                    device.post("records/:collection/:id/assign", use: SyncServer.assign)
                    device.put("blobs/:sha256", streamingBody: SyncServer.startBlobUpload)
                    device.head("blobs/:sha256", use: SyncServer.blob)
                    device.get("blobs/:sha256", use: SyncServer.blob)
                }
                app.any("*", use: SyncServer.noSuchEndpoint)
            }
        }

        router.group("admin", middleware: [ConsoleHeaders()]) { admin in
            // The console's page, style and script.
            admin.get("", use: SyncServer.consoleAsset)
            admin.head("", use: SyncServer.consoleAsset)
            admin.get("*", use: SyncServer.consoleAsset)
            admin.head("*", use: SyncServer.consoleAsset)

            admin.post("api/session", use: SyncServer.consoleSignIn)
            admin.get("api/session", use: SyncServer.consoleSession)
            admin.delete("api/session", use: SyncServer.consoleSignOut)

            admin.group("api", middleware: [ConsoleSessionCheck()]) { api in
                api.get("records", use: SyncServer.consoleRecords)
                api.get("records/:collection/:id", use: SyncServer.consoleRecord)
                api.get("devices", use: SyncServer.consoleDevices)
                api.get("problems", use: SyncServer.consoleProblems)
                api.get("tokens", use: SyncServer.consoleTokens)
                api.get("activity", use: SyncServer.consoleActivity)
                api.get("blobs/:sha256", use: SyncServer.consoleThumbnail)
                api.group(middleware: [ConsoleChangeCheck()]) { change in
                    change.post("records/:collection/:id/assign", use: SyncServer.consoleAssign)
                    change.post("tokens", use: SyncServer.consoleIssueToken)
                    change.post("tokens/:id/revoke", use: SyncServer.consoleRevokeToken)
                }
                api.any("*", use: SyncServer.noSuchConsoleEndpoint)
            }
        }
        return router
    }()
}
