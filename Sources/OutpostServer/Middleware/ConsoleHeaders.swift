import Foundation
import OutpostCore

/// Every console answer, errors included, carries a strict
/// Content-Security-Policy (scripts and styles only from the server itself,
/// no inline script, no framing), so a record whose data holds `<script>`
/// can only ever be text; and nothing of it is cached unless it says so.
struct ConsoleHeaders: Middleware {
    static let security = [
        "Content-Security-Policy":
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            + "form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
    ]

    func finish(_ response: inout HTTPResponse, request: RouteRequest) {
        for (name, value) in Self.security { response.headers[name] = value }
        if response.headers["Cache-Control"] == nil { response.headers["Cache-Control"] = "no-store" }
    }
}
