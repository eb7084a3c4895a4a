import Foundation
import OutpostCore

/// The server's published push limits, applied where the device can know
/// them: at capture, so a value the server would refuse is refused while
/// the person is still looking at it, with the reason, instead of
/// travelling to the server and coming back rejected.
struct CaptureLimits: Sendable, Equatable {
    var limits: HealthResponse.Limits

    /// A push body's envelope around a mutation's data: the body object,
    /// the mutations array, the mutation object (the data object is the
    /// data's own first level).
    static let envelopeDepth = 3
    /// Bytes a mutation adds around its data (seq, ids, op, names, base version).
    static let envelopeBytes = 512

    func check(_ data: JSONObject, text: String) throws {
        for (field, value) in data {
            if case .string(let string) = value, string.utf8.count > limits.maxFieldBytes {
                throw StoreError.invalidRecord(
                    "the field '\(field)' holds \(string.utf8.count) bytes; the server takes at most \(limits.maxFieldBytes)")
            }
        }
        let depth = Self.envelopeDepth + JSONValue.object(data).nestingDepth
        if depth > limits.maxDepth {
            throw StoreError.invalidRecord(
                "its data is nested \(depth - Self.envelopeDepth) levels deep; the server reads at most \(limits.maxDepth - Self.envelopeDepth)")
        }
        if text.utf8.count + Self.envelopeBytes > limits.maxBodyBytes {
            throw StoreError.invalidRecord(
                "it takes \(text.utf8.count) bytes; the server takes at most \(limits.maxBodyBytes - Self.envelopeBytes) in one change")
        }
    }

    /// The most mutation bytes to put in one push: a margin under the body limit.
    var batchBytes: Int { max(Self.envelopeBytes, limits.maxBodyBytes - limits.maxBodyBytes / 8) }
}

extension JSONValue {
    /// Levels of objects and arrays: 0 for a scalar, 1 for a flat object.
    var nestingDepth: Int {
        switch self {
        case .object(let object): return 1 + (object.values.map(\.nestingDepth).max() ?? 0)
        case .array(let array): return 1 + (array.map(\.nestingDepth).max() ?? 0)
        default: return 0
        }
    }
}
