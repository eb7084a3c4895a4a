import Foundation
import Outpost
import OutpostCore

/// `login` and `logout`.
enum AccountCommands {
    static let help = """
        Usage: outpost login --server URL --token TOKEN [--ca-file PATH] [--profile NAME]
               outpost logout [--force] [--profile NAME]

        login   checks the token with the server, then keeps it for this profile
                (readable by you only). Nothing is saved when the server cannot be reached.
                --ca-file: a PEM file of the certificate authority that signed an HTTPS
                server's certificate, trusted for this profile instead of the system's.
        logout  wipes this profile's data (the database and its WAL/SHM files) and token.
                With unsent changes it refuses, unless --force: they would be lost.
        """

    static func login(_ words: [String]) async throws {
        var arguments = try Arguments(words)
        let profile = try Profile.from(&arguments)
        let server = try arguments.required("server", "the server address, e.g. http://127.0.0.1:8787")
        let token = try arguments.required("token", "the token from 'outpost token issue'")
        let caFile = arguments.option("ca-file").map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        try arguments.checkAllUsed()
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw UsageError("'\(server)' is not a server address such as http://127.0.0.1:8787.")
        }
        let transport: any SyncTransport
        do {
            transport = try HTTPTransport.make(baseURL: url, trustedCertificates: caFile)
        } catch {
            throw UsageError("--ca-file: \(error).")
        }
        let response: TransportResponse
        do {
            response = try await transport.send(
                TransportRequest(method: "GET", target: "/v1/scope", headers: ["Authorization": "Bearer \(token)"], timeout: 10))
        } catch TransportError.notSent(let reason) where reason.contains("certificate") {
            throw CommandFailure(
                "\(server) was reached, but \(reason); you are not signed in. Give its certificate authority with --ca-file PATH.")
        } catch {
            throw CommandFailure("Could not reach \(server), so you are not signed in. Try again when the network is back.")
        }
        guard response.status == 200, let scope = try? WireCoding.decode(ScopeResponse.self, from: response.body) else {
            let message = (try? WireCoding.decode(ErrorBody.self, from: response.body))?.message ?? "The server refused the token."
            throw CommandFailure(message)
        }
        if let existing = try? profile.loadAccount(), existing.user != scope.user || existing.server != server {
            try await profile.withStore { store in
                if try await store.outboxSummary().total > 0 {
                    throw CommandFailure(
                        "This profile holds unsent changes of \(existing.user); sync or log out first, or use another --profile.")
                }
                try await store.destroy()
            }
        }
        // The collections the server syncs (a server without the endpoint: its defaults).
        let collections = try? await transport.send(
            TransportRequest(method: "GET", target: "/v1/collections", headers: ["Authorization": "Bearer \(token)"], timeout: 10))
        let schemas = collections.flatMap { $0.status == 200 ? try? WireCoding.decode(CollectionsResponse.self, from: $0.body) : nil }
        try profile.save(
            Profile.Account(
                server: server, token: token, user: scope.user, role: scope.role, team: scope.team,
                collections: schemas?.collections, caFile: caFile))
        print("Signed in as \(scope.user) (\(scope.role.rawValue), team \(scope.team)) on \(server).")
    }

    static func logout(_ words: [String]) async throws {
        var arguments = try Arguments(words, flagNames: ["force"])
        let profile = try Profile.from(&arguments)
        let force = arguments.flag("force")
        try arguments.checkAllUsed()
        guard arguments.positional.isEmpty else { throw UsageError("logout takes no words, only options.") }
        let account = try profile.loadAccount()
        // --force also gets out of a lost database: there is nothing left to keep.
        try await profile.withStore(ifDatabaseLost: force ? .startOver : .refuse) { store in
            let engine = try profile.engine(store: store, account: account)
            do {
                try await engine.signOut(unsentChanges: force ? .discard : .refuse)
            } catch let error as SignOutError {
                throw CommandFailure("\(error.description) Run 'outpost sync' first, or 'outpost logout --force' to lose them.")
            }
            // The process ends here: the emptied files go too.
            try await store.destroy()
        }
        try? FileManager.default.removeItem(at: profile.accountFile)
        print("Signed out; this computer's copy of \(account.user)'s data is wiped.")
    }
}
