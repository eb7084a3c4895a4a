import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSimulation
import OutpostTesting

/// `outpost bench attachments`: photos uploaded by the engine over loopback
/// against `curl` PUTting the same bytes to a server of its own in the same
/// run; then the same photos through a proxy that cuts the upload every 5 MB.
///
/// `curl` runs just before the engine and again just after it (each time to
/// a new server built as the engine's: the same blob path, the same
/// syncs), and the floor is the mean of the two: on a shared machine the
/// load moves within a run, and a floor taken at one moment only compared
/// the engine with another machine.
enum AttachmentBench {
    static func run(photos: Int, photoBytes: Int) async throws -> [BenchResult] {
        let directory = try TemporaryDirectory(prefix: "outpost-bench-blobs")
        var files: [URL] = []
        for index in 0..<photos {
            let url = URL(fileURLWithPath: directory.path("photo-\(index).jpg"))
            try bytes(photoBytes, seed: UInt64(index + 1)).write(to: url)
            files.append(url)
        }
        let total = Double(photos * photoBytes)

        var shas: [String] = []
        for file in files { shas.append(SHA256.hex(of: [UInt8](try Data(contentsOf: file)))) }
        let curlBefore = try await curlPut(files, shas, into: directory.path("curl-before"))

        // The platform's transport alone, PUTting each file whole: what the transport itself costs.
        let rawServer = try BlobServer(directory.path("raw"))
        defer { rawServer.http.stop() }
        try await waitUntilServing(rawServer.base)
        let rawToken = try rawServer.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        let transport = HTTPTransport.make(baseURL: rawServer.base)
        var loaded: [(String, Data)] = []
        for (file, sha) in zip(files, shas) { loaded.append((sha, try Data(contentsOf: file))) }
        let rawSeconds = try await Bench.time {
            for (sha, data) in loaded {
                let answer = try await transport.send(
                    TransportRequest(
                        method: "PUT", target: "/v1/blobs/\(sha)",
                        headers: ["Authorization": "Bearer \(rawToken)", "Content-Type": "image/jpeg"], body: data,
                        timeout: 60))
                guard answer.status == 200 else { throw CommandFailure("a raw transport PUT was answered \(answer.status)") }
            }
        }

        // The engine: each photo attached to a visit, then one sync.
        let engineServer = try BlobServer(directory.path("engine"))
        defer { engineServer.http.stop() }
        let (store, engine) = try await device(engineServer, directory.path("device.sqlite"))
        let attachSeconds = try await Bench.time { try await capture(files, into: store) }
        var report = SyncReport(trigger: .manual)
        let engineCPU = cpuSeconds()
        let engineSeconds = try await Bench.time { report = try await engine.sync(timeout: .seconds(600)) }
        let engineCPUSeconds = cpuSeconds() - engineCPU
        guard report.attachmentsUploaded == photos else {
            throw CommandFailure("the engine uploaded \(report.attachmentsUploaded) of \(photos) photos")
        }
        await store.close()
        let curlAfter = try await curlPut(files, shas, into: directory.path("curl-after"))
        let curlSeconds = (curlBefore.seconds + curlAfter.seconds) / 2
        let engineRate = total / engineSeconds / 1e6
        let curlRate = total / curlSeconds / 1e6
        let ratio = engineRate / curlRate
        var upload = BenchResult(
            name: "attachments-upload", figure: engineRate, unit: "MB/s", baseline: curlRate,
            baselineLabel: "curl PUT, same bytes, just before and just after",
            ratio: ratio, ratioMeaning: "engine throughput / curl throughput", target: "≥ 0.8× curl", met: ratio >= 0.8)
        upload.details = [
            "photos": Double(photos), "photo_bytes": Double(photoBytes), "engine_seconds": engineSeconds, "curl_seconds": curlSeconds,
            "curl_before_mb_per_s": total / curlBefore.seconds / 1e6, "curl_after_mb_per_s": total / curlAfter.seconds / 1e6,
            "engine_cpu_seconds": engineCPUSeconds, "curl_cpu_seconds": (curlBefore.cpuSeconds + curlAfter.cpuSeconds) / 2,
            "attach_seconds": attachSeconds, "transport_put_seconds": rawSeconds,
            "transport_put_mb_per_s": total / rawSeconds / 1e6,
        ]
        upload.notes = [
            "The engine's sync also pushes the \(photos) visits that name the photos; attaching (copy and hash into the store) is counted apart.",
            "Floor: curl just before the engine and just after (curl_before/after_mb_per_s), each to a new server like the engine's; curl_seconds is their mean.",
            "cpu_seconds: this process's CPU and curl's (server included) over the upload: what the load on a shared machine does not move.",
            "transport_put: the same files PUT whole through the platform's transport alone (CurlTransport on Linux; files read beforehand), as the engine sends them: the transport's own cost.",
        ]

        // Through a proxy that cuts the upload every 5 MB.
        let cutServer = try BlobServer(directory.path("cut"))
        defer { cutServer.http.stop() }
        let proxy = try ChaosProxy(upstreamPort: cutServer.http.port, mode: .cutEvery(bytes: 5_000_000))
        defer { proxy.stop() }
        let (cutStore, cutEngine) = try await device(cutServer, directory.path("cut-device.sqlite"), through: proxy.url)
        try await capture(files, into: cutStore)
        var attempts = 0
        let cutSeconds = try await Bench.time {
            while true {
                attempts += 1
                if let report = try? await cutEngine.sync(timeout: .seconds(600)), report.failure == nil,
                    try await cutStore.attachmentSummary().waiting == 0
                {
                    return
                }
                guard attempts < 10 * photos else { throw CommandFailure("the uploads through the cutting proxy never finished") }
            }
        }
        await cutStore.close()
        let cuts = proxy.cuts
        let sent = Double(proxy.bytesFromClients)
        let stored = Double(cutServer.server.metrics.blobBytesReceivedTotal)
        let resentPerCut = cuts > 0 ? (sent - total) / Double(cuts) : 0
        var cut = BenchResult(
            name: "attachments-upload-cut-every-5MB", figure: resentPerCut / 1e3, unit: "kB sent again per cut",
            baseline: Double(photoBytes) / 2e3, baselineLabel: "half a photo, what restarting a photo loses on average",
            ratio: resentPerCut / (Double(photoBytes) / 2), ratioMeaning: "bytes sent again per cut / half a photo",
            target: "every byte stored once; less sent again per cut than a restart would", met: stored == total && resentPerCut < Double(photoBytes) / 2)
        cut.details = [
            "cuts": Double(cuts), "syncs": Double(attempts), "seconds": cutSeconds, "bytes_from_client": sent,
            "bytes_stored": stored, "photo_bytes_total": total,
        ]
        cut.notes = [
            "Sent again: request heads, and bytes a cut destroys in the sockets before the server reads them; the server's copy of every photo holds each byte once (bytes_stored)."
        ]
        return [upload, cut]
    }

    /// `curl`, one process, one kept-alive connection, PUTting every file
    /// whole to a new server in `folder`: its seconds and the CPU seconds of
    /// both (this process holds the server).
    static func curlPut(_ files: [URL], _ shas: [String], into folder: String) async throws -> (seconds: Double, cpuSeconds: Double) {
        let server = try BlobServer(folder)
        defer { server.http.stop() }
        try await waitUntilServing(server.base)
        let token = try server.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil)
        var arguments = ["-s", "-f", "-o", "/dev/null", "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: image/jpeg"]
        for (file, sha) in zip(files, shas) { arguments += ["-T", file.path, "\(server.base.absoluteString)/v1/blobs/\(sha)"] }
        let cpu = cpuSeconds()
        let seconds = try await Bench.time {
            let output = try await runBlocking { [arguments] in try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/curl"), arguments) }
            guard output.status == 0 else { throw CommandFailure("curl failed (\(output.status)): \(output.stderr)") }
        }
        return (seconds, cpuSeconds() - cpu)
    }

    /// CPU seconds of this process and of the children it has waited for (curl).
    static func cpuSeconds() -> Double { Bench.ownCPUSeconds() + Bench.childrenCPUSeconds() }

    /// A server on SQLite with uploads streamed to files, on a socket.
    struct BlobServer {
        let server: SyncServer
        let http: HTTPServer
        let base: URL

        init(_ folder: String) throws {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            server = try SyncServer(database: try SQLiteServerDatabase(path: folder + "/server.sqlite"), config: ServerConfig())
            http = try HTTPServer(port: 0, threads: 4, server: server)
            base = URL(string: "http://127.0.0.1:\(http.port)")!
        }
    }

    static func device(_ server: BlobServer, _ path: String, through: URL? = nil) async throws -> (LocalStore, SyncEngine) {
        try await waitUntilServing(server.base)
        let store = try LocalStore(
            path: path, collections: [CollectionDescriptor(name: "people"), CollectionDescriptor(name: "visits", references: ["person": "people"])])
        var options = SyncOptions()
        options.periodicInterval = nil
        options.liveUpdates = false
        options.attachmentUploadTime = .seconds(600)
        let engine = SyncEngine(
            store: store, transport: HTTPTransport.make(baseURL: through ?? server.base),
            token: try server.server.tokens.issue(user: "u-1", role: .field, team: "t-1", ttl: nil), options: options)
        return (store, engine)
    }

    /// A person and one visit per photo, each photo attached from its file.
    static func capture(_ files: [URL], into store: LocalStore) async throws {
        let person = try await store.create(in: "people", ["name": "Romero"])
        for file in files {
            try await store.write { transaction in
                let photo = try transaction.attach(contentsOf: file)
                try transaction.create(
                    in: "visits", ["person": .string(person.wireText), "visited_at": "2026-11-29T10:00:00Z", "photo": photo.jsonValue])
            }
        }
    }

    static func bytes(_ count: Int, seed: UInt64) -> Data {
        var random = SeededRandom(seed: seed)
        return Data(random.bytes(count))
    }
}
