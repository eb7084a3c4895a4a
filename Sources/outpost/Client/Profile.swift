import Foundation
import Outpost
import OutpostCore
import OutpostServer
import OutpostSQLite

/// A signed-in account on this computer: its settings and its device
/// database, under the XDG directories (`$XDG_CONFIG_HOME/outpost/NAME`,
/// `$XDG_DATA_HOME/outpost/NAME`), so profiles never share data.
struct Profile {
    let name: String
    let configDirectory: URL
    let dataDirectory: URL

    struct Account: Codable {
        var server: String
        var token: String
        var user: String
        var role: Role
        var team: String
        /// The writable collections the server syncs, as it said at sign-in
        /// (the app's own tables among them); nil: the server's defaults.
        var collections: [CollectionSchema]? = nil
        /// The PEM file of the CA trusted for this server (`login --ca-file`); nil: the system's.
        var caFile: String? = nil
    }

    init(name: String) throws {
        guard CollectionSchema.isValidName(name) || name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }),
            !name.isEmpty, name.count <= 64
        else { throw UsageError("A profile name uses letters, digits, - and _ only.") }
        self.name = name
        let environment = ProcessInfo.processInfo.environment
        let home = URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory())
        let config = environment["XDG_CONFIG_HOME"].map { URL(fileURLWithPath: $0) } ?? home.appendingPathComponent(".config")
        let data = environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) } ?? home.appendingPathComponent(".local/share")
        configDirectory = config.appendingPathComponent("outpost/\(name)")
        dataDirectory = data.appendingPathComponent("outpost/\(name)")
    }

    static func from(_ arguments: inout Arguments) throws -> Profile {
        try Profile(name: arguments.option("profile") ?? "default")
    }

    var accountFile: URL { configDirectory.appendingPathComponent("account.json") }
    var databasePath: String { dataDirectory.appendingPathComponent("device.sqlite").path }

    func loadAccount() throws -> Account {
        guard let data = FileManager.default.contents(atPath: accountFile.path) else {
            throw CommandFailure("Not signed in\(name == "default" ? "" : " on profile \(name)"): run 'outpost login --server URL --token TOKEN' first.")
        }
        do {
            return try WireCoding.decode(Account.self, from: data)
        } catch {
            throw CommandFailure("The account file \(accountFile.path) is damaged; run 'outpost login' again.")
        }
    }

    /// Saves the sign-in so that a power loss at any moment leaves either
    /// the previous account file or this one, whole (written beside it,
    /// synced, renamed over it, the folder synced).
    func save(_ account: Account) throws {
        let data = try WireCoding.encode(account)
        do {
            // The token is a secret: readable by this user only.
            try DurableFiles.write(data, to: accountFile.path, permissions: 0o600)
        } catch {
            throw CommandFailure("Could not write \(accountFile.path): \(error).")
        }
    }

    /// The collections a CLI device keeps: those the server named at
    /// sign-in, or the server's defaults.
    var collections: [CollectionDescriptor] {
        let schemas = (try? loadAccount())?.collections ?? DefaultCollections.all
        return schemas.filter { !$0.readOnly }.map {
            CollectionDescriptor(schema: $0, indexedFields: $0.name == "people" ? ["name"] : [])
        }
    }

    func openStore(ifDatabaseLost: LostDatabasePolicy = .refuse) throws -> LocalStore {
        try DurableFiles.createDirectory(dataDirectory.path)
        return try LocalStore(path: databasePath, collections: collections, ifDatabaseLost: ifDatabaseLost)
    }

    /// Runs `body` on the profile's store and closes the store before
    /// returning, whether `body` threw or not: the process never exits
    /// while the store is still closing.
    func withStore<T>(ifDatabaseLost: LostDatabasePolicy = .refuse, _ body: (LocalStore) async throws -> T) async throws -> T {
        let store = try openStore(ifDatabaseLost: ifDatabaseLost)
        do {
            let result = try await body(store)
            await store.close()
            return result
        } catch {
            await store.close()
            throw error
        }
    }

    /// `live`: keep the live channel once started (`outpost watch`); other
    /// commands run one cycle and exit.
    func engine(store: LocalStore, account: Account, timeout: TimeInterval = 15, live: Bool = false) throws -> SyncEngine {
        var options = SyncOptions()
        options.liveUpdates = live
        options.periodicInterval = live ? .seconds(300) : nil
        options.requestTimeout = timeout
        // Named in the server's console beside the device.
        options.clientName = "outpost-cli/\(OutpostVersion.current)"
        return SyncEngine(store: store, transport: try transport(account), token: account.token, options: options)
    }

    /// The transport to the account's server, trusting its CA file if it has one.
    func transport(_ account: Account) throws -> any SyncTransport {
        guard let url = URL(string: account.server) else { throw CommandFailure("The saved server address is not valid.") }
        do {
            return try HTTPTransport.make(baseURL: url, trustedCertificates: account.caFile)
        } catch {
            throw CommandFailure("\(error); run 'outpost login' again with --ca-file.")
        }
    }

    /// Why the server could not be reached, when it is something a person
    /// can fix here (its certificate is not trusted): the engine only says
    /// "offline", which would send them looking for a network that works.
    func unreachableReason(_ account: Account) async -> String? {
        guard let transport = try? transport(account) else { return nil }
        do {
            _ = try await transport.send(TransportRequest(method: "GET", target: "/v1/health", timeout: 10))
            return nil
        } catch TransportError.notSent(let reason) where reason.contains("certificate") {
            return "\(account.server) was reached, but \(reason). Give its certificate authority with 'outpost login --ca-file PATH'."
        } catch {
            return nil
        }
    }
}
