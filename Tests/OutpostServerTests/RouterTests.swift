import Foundation
import OutpostCore
@testable import OutpostServer
import Testing

/// The route table read by the router alone, without a server: each
/// endpoint resolves to its own route, unknown paths are 404 and known
/// paths with another method 405, and `:parameters` come back as sent.
@Suite("Router")
struct RouterTests {
    let router = Router.outpost

    /// The route a request resolves to, as "METHOD pattern" (any method: "* pattern").
    func resolved(_ method: String, _ path: String) -> String? {
        guard case .found(let route, _) = router.resolve(method: method, path: path) else { return nil }
        return "\(route.method ?? "*") \(route.pattern)"
    }

    static let uuid = "0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b"
    static let sha = String(repeating: "ab", count: 32)

    /// Every endpoint, by a request a client sends to it.
    static let endpoints: [(method: String, path: String, route: String)] = [
        ("GET", "/metrics", "GET metrics"),
        ("GET", "/v1/health", "GET v1/health"),
        ("GET", "/v1/ready", "GET v1/ready"),
        ("POST", "/v1/push", "POST v1/push"),
        ("GET", "/v1/pull", "GET v1/pull"),
        ("GET", "/v1/stream", "GET v1/stream"),
        ("GET", "/v1/scope", "GET v1/scope"),
        ("GET", "/v1/collections", "GET v1/collections"),
        ("GET", "/v1/search", "GET v1/search"),
        ("GET", "/v1/mutations/\(uuid)", "GET v1/mutations/:id"),
        ("GET", "/v1/records/people/\(uuid)", "GET v1/records/:collection/:id"),
        ("POST", "/v1/records/people/\(uuid)/assign", "POST v1/records/:collection/:id/assign"),
        ("PUT", "/v1/blobs/\(sha)", "PUT v1/blobs/:sha256"),
        ("HEAD", "/v1/blobs/\(sha)", "HEAD v1/blobs/:sha256"),
        ("GET", "/v1/blobs/\(sha)", "GET v1/blobs/:sha256"),
        ("GET", "/v1/nothing/here", "* v1/*"),
        ("GET", "/admin", "GET admin"),
        ("HEAD", "/admin", "HEAD admin"),
        ("GET", "/admin/console.js", "GET admin/*"),
        ("HEAD", "/admin/console.css", "HEAD admin/*"),
        ("GET", "/admin/api", "GET admin/*"),
        ("POST", "/admin/api/session", "POST admin/api/session"),
        ("GET", "/admin/api/session", "GET admin/api/session"),
        ("DELETE", "/admin/api/session", "DELETE admin/api/session"),
        ("GET", "/admin/api/records", "GET admin/api/records"),
        ("GET", "/admin/api/records/people/\(uuid)", "GET admin/api/records/:collection/:id"),
        ("POST", "/admin/api/records/people/\(uuid)/assign", "POST admin/api/records/:collection/:id/assign"),
        ("GET", "/admin/api/devices", "GET admin/api/devices"),
        ("GET", "/admin/api/problems", "GET admin/api/problems"),
        ("GET", "/admin/api/tokens", "GET admin/api/tokens"),
        ("POST", "/admin/api/tokens", "POST admin/api/tokens"),
        ("POST", "/admin/api/tokens/\(sha)/revoke", "POST admin/api/tokens/:id/revoke"),
        ("GET", "/admin/api/activity", "GET admin/api/activity"),
        ("GET", "/admin/api/blobs/\(sha)", "GET admin/api/blobs/:sha256"),
        ("DELETE", "/admin/api/", "* admin/api/*"),
        ("GET", "/admin/api/session/x", "* admin/api/*"),
    ]

    @Test func everyEndpointResolvesToItsRoute() {
        for endpoint in Self.endpoints {
            #expect(resolved(endpoint.method, endpoint.path) == endpoint.route, "\(endpoint.method) \(endpoint.path)")
        }
        // And every route of the table is one of them: none is shadowed by another.
        let declared = Set(router.routes.map { "\($0.method ?? "*") \($0.pattern)" })
        #expect(declared == Set(Self.endpoints.map(\.route)))
    }

    @Test func theLiveAndUploadRoutesAreTheirKinds() throws {
        func action(_ method: String, _ path: String) throws -> RouteAction {
            guard case .found(let route, _) = router.resolve(method: method, path: path) else {
                Issue.record("\(method) \(path) did not resolve")
                throw CancellationError()
            }
            return route.action
        }
        guard case .live = try action("GET", "/v1/stream") else { Issue.record("the stream is not live"); return }
        guard case .live = try action("GET", "/v1/pull") else { Issue.record("the pull is not live"); return }
        guard case .upload = try action("PUT", "/v1/blobs/\(Self.sha)") else { Issue.record("a PUT blob does not stream"); return }
        guard case .respond = try action("GET", "/v1/blobs/\(Self.sha)") else { Issue.record("a GET blob is not immediate"); return }
    }

    @Test func unknownPathsAreNotFound() {
        for path in ["/", "/v1", "/v2/pull", "/metrics/x", "/V1/health", "v1/health", "*", "", "/.env", "/adminx"] {
            guard case .notFound = router.resolve(method: "GET", path: path) else {
                Issue.record("\(path) resolved")
                continue
            }
        }
    }

    @Test func aKnownPathWithAnotherMethodIsMethodNotAllowed() {
        func allowed(_ method: String, _ path: String) -> [String]? {
            guard case .methodNotAllowed(let allowed, _) = router.resolve(method: method, path: path) else { return nil }
            return allowed
        }
        #expect(allowed("DELETE", "/v1/push") == ["POST"])
        #expect(allowed("get", "/v1/health") == ["GET"], "methods are case-sensitive")
        #expect(allowed("POST", "/v1/blobs/\(Self.sha)") == ["PUT", "HEAD", "GET"])
        #expect(allowed("POST", "/metrics") == ["GET"])
        #expect(allowed("PUT", "/admin/api/tokens") == ["GET", "POST"])
        #expect(allowed("PUT", "/admin/api/session") == ["POST", "GET", "DELETE"])
        #expect(allowed("POST", "/admin/console.js") == ["GET", "HEAD"])
        #expect(allowed("GET", "/v1/records/people/\(Self.uuid)/assign") == ["POST"])
    }

    @Test func parametersComeBackAsTheyWereSent() {
        guard case .found(_, let parameters) = router.resolve(method: "GET", path: "/v1/records/my%20people/a%2Fb") else {
            Issue.record("not found")
            return
        }
        // The socket layer decodes a path once; the router does not again.
        #expect(parameters == ["collection": "my%20people", "id": "a%2Fb"])
        guard case .found(_, let decoded) = router.resolve(method: "GET", path: "/v1/records/my people/\(Self.uuid)") else {
            Issue.record("not found")
            return
        }
        #expect(decoded == ["collection": "my people", "id": Self.uuid])
        guard case .found(_, let empty) = router.resolve(method: "GET", path: "/v1/blobs/") else {
            Issue.record("not found")
            return
        }
        #expect(empty == ["sha256": ""], "an empty segment is a parameter too (the handler refuses it)")
    }

    @Test func theMostSpecificPatternWins() {
        var router = Router()
        router.get("a/:name", use: { _ in { _ in HTTPResponse(status: 201) } })
        router.get("a/b", use: { _ in { _ in HTTPResponse(status: 202) } })
        router.any("a/*", use: { _ in { _ in HTTPResponse(status: 203) } })
        func pattern(_ method: String, _ path: String) -> String? {
            guard case .found(let route, _) = router.resolve(method: method, path: path) else { return nil }
            return route.pattern
        }
        #expect(pattern("GET", "/a/b") == "a/b")
        #expect(pattern("GET", "/a/c") == "a/:name")
        #expect(pattern("GET", "/a/b/c") == "a/*")
        #expect(pattern("POST", "/a/c") == nil, "the parameter's route is the most specific; it only answers GET")
        #expect(pattern("GET", "/a") == nil, "* stands for at least one segment")
    }

    @Test func groupsPrefixPathsAndStackMiddleware() {
        struct Step: Middleware { let name: String }
        var router = Router()
        router.group("outer", middleware: [Step(name: "one")]) { outer in
            outer.group("inner", middleware: [Step(name: "two")]) { inner in
                inner.get("leaf", use: { _ in { _ in HTTPResponse(status: 200) } })
            }
        }
        guard case .found(let route, _) = router.resolve(method: "GET", path: "/outer/inner/leaf") else {
            Issue.record("not found")
            return
        }
        #expect(route.middleware.compactMap { ($0 as? Step)?.name } == ["one", "two"])
    }
}
