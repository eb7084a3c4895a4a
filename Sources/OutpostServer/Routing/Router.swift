import Foundation
import OutpostCore

/// Finds the route of a request from its method and path.
///
/// A pattern is slash-separated segments: a literal, `:name` (any one
/// segment, handed to the handler by that name) or a final `*` (one or
/// more segments). When several patterns fit a path the most specific one
/// wins (a literal before a parameter before `*`, segment by segment); if
/// none of the winners takes the method, the answer is 405 with `Allow`.
struct Router: Sendable {
    enum Segment: Equatable, Sendable {
        case literal(String)
        case parameter(String)
        case rest

        /// How specific a segment is, for choosing between patterns that fit.
        var rank: Int {
            switch self {
            case .literal: 2
            case .parameter: 1
            case .rest: 0
            }
        }
    }

    struct Route: Sendable {
        /// nil: every method.
        let method: String?
        /// As declared, with the groups' prefixes, e.g. `v1/records/:collection/:id`.
        let pattern: String
        let segments: [Segment]
        /// Outermost group first.
        let middleware: [any Middleware]
        let action: RouteAction
    }

    enum Resolution: Sendable {
        case found(Route, parameters: [String: String])
        /// The path is one of the table's, not with this method.
        case methodNotAllowed(allowed: [String], route: Route)
        case notFound
    }

    private(set) var routes: [Route] = []
    private var prefix: [String] = []
    private var middleware: [any Middleware] = []

    init() {}

    // MARK: Declaring

    /// Routes under `path` that share `middleware` (run in order, after the enclosing groups').
    mutating func group(_ path: String = "", middleware: [any Middleware] = [], _ declare: (inout Router) -> Void) {
        var inner = Router()
        inner.prefix = prefix + Self.split(path)
        inner.middleware = self.middleware + middleware
        declare(&inner)
        routes += inner.routes
    }

    mutating func get(_ pattern: String, use handler: @escaping RouteAction.Respond) {
        add("GET", pattern, .respond(handler))
    }
    mutating func get(_ pattern: String, live handler: @escaping RouteAction.Live) { add("GET", pattern, .live(handler)) }
    mutating func head(_ pattern: String, use handler: @escaping RouteAction.Respond) {
        add("HEAD", pattern, .respond(handler))
    }
    mutating func post(_ pattern: String, use handler: @escaping RouteAction.Respond) {
        add("POST", pattern, .respond(handler))
    }
    mutating func delete(_ pattern: String, use handler: @escaping RouteAction.Respond) {
        add("DELETE", pattern, .respond(handler))
    }
    /// A PUT whose body the handler takes as it arrives, after checking the headers.
    mutating func put(_ pattern: String, streamingBody handler: @escaping RouteAction.Upload) {
        add("PUT", pattern, .upload(handler))
    }
    /// Every method (a group's answer for paths it does not know).
    mutating func any(_ pattern: String, use handler: @escaping RouteAction.Respond) {
        add(nil, pattern, .respond(handler))
    }

    private mutating func add(_ method: String?, _ pattern: String, _ action: RouteAction) {
        let parts = prefix + Self.split(pattern)
        let segments = parts.enumerated().map { index, part -> Segment in
            if part == "*" {
                precondition(index == parts.count - 1, "* ends a pattern: \(pattern)")
                return .rest
            }
            return part.hasPrefix(":") ? .parameter(String(part.dropFirst())) : .literal(part)
        }
        routes.append(Route(
            method: method, pattern: parts.joined(separator: "/"), segments: segments, middleware: middleware, action: action))
    }

    private static func split(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init)
    }

    // MARK: Resolving

    /// The route for `method` and `path` (`/`-rooted, as it arrived: its
    /// segments are not decoded again).
    func resolve(method: String, path: String) -> Resolution {
        guard path.hasPrefix("/") else { return .notFound }
        let parts = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        var best: [Int] = []
        var fitting: [(Route, [String: String])] = []
        for route in routes {
            guard let parameters = Self.match(route.segments, parts) else { continue }
            let rank = route.segments.map(\.rank)
            if fitting.isEmpty || best.lexicographicallyPrecedes(rank) {
                best = rank
                fitting = [(route, parameters)]
            } else if rank == best {
                fitting.append((route, parameters))
            }
        }
        guard let first = fitting.first else { return .notFound }
        if let (route, parameters) = fitting.first(where: { $0.0.method == nil || $0.0.method == method }) {
            return .found(route, parameters: parameters)
        }
        var allowed: [String] = []
        for (route, _) in fitting where !allowed.contains(route.method ?? "") { allowed.append(route.method ?? "") }
        return .methodNotAllowed(allowed: allowed, route: first.0)
    }

    /// The parameters when `segments` fit `parts`.
    private static func match(_ segments: [Segment], _ parts: [String]) -> [String: String]? {
        var parameters: [String: String] = [:]
        for (index, segment) in segments.enumerated() {
            switch segment {
            case .rest:
                return parts.count > index ? parameters : nil
            case .literal(let text):
                guard index < parts.count, parts[index] == text else { return nil }
            case .parameter(let name):
                guard index < parts.count else { return nil }
                parameters[name] = parts[index]
            }
        }
        return parts.count == segments.count ? parameters : nil
    }
}
