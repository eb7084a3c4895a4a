public import Foundation
import OutpostCore

/// Plain, non-blaming sentences for each situation, in the person's
/// language: English, Italian, Spanish, Portuguese and Russian (the
/// languages of the teams Outpost was first built with); any other
/// language reads English. Data without a timestamp is never described as
/// current.
public enum StatusMessage {
    /// The languages with their own sentences.
    public static let languages = ["en", "it", "es", "pt", "ru"]

    /// The sentence a status bar shows for this status.
    public static func text(for status: SyncStatus, timeZone: TimeZone = .current, locale: Locale = .current) -> String {
        let phrases = Phrases(locale)
        let updated = status.dataUpdatedAt.flatMap(\.date).map { describe($0, timeZone: timeZone, locale: locale) }
        let unsent = status.unsent == 0 ? "none" : status.unsent == 1 ? "single" : "plural"
        if status.signInRequired {
            return phrases["session_expired.\(status.unsent == 1 ? "single" : "plural")"]
        }
        if status.lastError == .accessRevoked { return phrases["access_revoked"] }
        if status.updateRequired { return phrases["update_required"] }
        if let progress = status.progress, status.isSyncing {
            return phrases["downloading", phrases.number(progress.done), phrases.number(progress.total)]
        }
        switch status.connectivity {
        case .offline:
            if let updated { return phrases["offline.seen.\(unsent)", updated] }
            return phrases["offline.empty.\(unsent)"]
        case .degraded:
            if status.unsent > 0 { return phrases.counted("slow.unsent", status.unsent) }
            if let updated { return phrases["slow.updated", updated] }
            return phrases["slow"]
        case .unknown, .online:
            break
        }
        if status.rejected > 0 { return phrases.counted("rejected", status.rejected) }
        if status.conflicts > 0 { return phrases.counted("conflicts", status.conflicts) }
        if status.isSyncing {
            if status.isUploadingAttachments, let uploading = uploadingText(status.attachments, phrases) { return uploading }
            return phrases["syncing"]
        }
        if status.unsent > 0 { return phrases.counted("waiting", status.unsent) }
        if let updated { return phrases["all_sent", updated] }
        return phrases[status.connectivity == .unknown ? "checking" : "not_synced"]
    }

    /// A sentence about the live channel, for a detail line beside
    /// ``text(for:timeZone:locale:)``: whether others' changes arrive as
    /// they happen, or only at the next sync.
    public static func liveText(for status: SyncStatus, locale: Locale = .current) -> String {
        Phrases(locale)["live.\(status.live.rawValue)"]
    }

    /// A sentence about attachments, for a detail line beside
    /// ``text(for:timeZone:locale:)``: refused files first, then the
    /// upload's progress, then files waiting; nil when none waits.
    public static func attachmentText(for status: SyncStatus, locale: Locale = .current) -> String? {
        let phrases = Phrases(locale)
        let attachments = status.attachments
        if attachments.failed > 0 { return phrases.counted("attachments.failed", attachments.failed) }
        guard attachments.waiting > 0 else { return nil }
        if status.isUploadingAttachments, let uploading = uploadingText(attachments, phrases) { return uploading }
        return phrases.counted("attachments.waiting", attachments.waiting, phrases.size(attachments.bytesWaiting))
    }

    private static func uploadingText(_ attachments: AttachmentSummary, _ phrases: Phrases) -> String? {
        guard attachments.waiting > 0 else { return nil }
        return phrases["attachments.uploading", phrases.size(attachments.bytesUploaded), phrases.size(attachments.bytesToUpload)]
    }

    /// "3 Aug at 09:42" (English), "3 ago alle 09:42" (Italian), in the
    /// person's time zone.
    public static func describe(_ date: Date, timeZone: TimeZone, locale: Locale) -> String {
        let formatter = DateFormatter()
        formatter.locale = locale
        formatter.timeZone = timeZone
        formatter.dateFormat = Phrases(locale)["date.format"]
        return formatter.string(from: date)
    }
}

/// One language's sentences, read from the package's `Localizable.strings`.
struct Phrases {
    let language: String
    private let bundle: Bundle?
    private let english: Bundle?
    private let locale: Locale

    init(_ locale: Locale) {
        let code = locale.language.languageCode?.identifier ?? "en"
        language = StatusMessage.languages.contains(code) ? code : "en"
        self.locale = locale
        bundle = Self.bundles[language] ?? nil
        english = Self.bundles["en"] ?? nil
    }

    /// Each language's resource bundle, looked up once: a status bar asks
    /// for a sentence after every sync.
    private static let bundles: [String: Bundle?] = Dictionary(
        uniqueKeysWithValues: StatusMessage.languages.map { language in
            (language, Bundle.module.path(forResource: language, ofType: "lproj").flatMap(Bundle.init(path:)))
        })

    /// The sentence for `key`, with its `%@` arguments filled in order.
    subscript(_ key: String, _ arguments: String...) -> String {
        let format = lookup(key) ?? key
        return arguments.isEmpty ? format : String(format: format, arguments: arguments.map { $0 as any CVarArg })
    }

    func lookup(_ key: String) -> String? {
        for source in [bundle, english] {
            guard let source else { continue }
            let text = source.localizedString(forKey: key, value: Self.missing, table: nil)
            if text != Self.missing { return text }
        }
        return nil
    }

    private static let missing = "\u{0}missing"

    /// A sentence about `count` things: the `.single` form for exactly
    /// one where the language has it, else the language's plural category.
    func counted(_ key: String, _ count: Int, _ more: String...) -> String {
        var keys = count == 1 ? ["\(key).single"] : []
        keys += ["\(key).\(PluralCategory(count, language: language).rawValue)", "\(key).other"]
        let chosen = keys.first { lookup($0) != nil } ?? "\(key).other"
        let format = lookup(chosen) ?? chosen
        return String(format: format, arguments: ([number(Int64(count))] + more).map { $0 as any CVarArg })
    }

    /// A size in kilobytes, megabytes or gigabytes (decimal units, as
    /// phones show storage), one digit after the point above 10 kB.
    func size(_ bytes: Int64) -> String {
        let (value, unit): (Double, String) =
            bytes >= 1_000_000_000 ? (Double(bytes) / 1e9, "size.gb")
            : bytes >= 1_000_000 ? (Double(bytes) / 1e6, "size.mb") : (max(Double(bytes) / 1e3, bytes > 0 ? 0.1 : 0), "size.kb")
        let digits = value >= 100 ? 0 : 1
        let formatter = NumberFormatter()
        formatter.locale = locale
        formatter.numberStyle = .decimal
        formatter.maximumFractionDigits = digits
        formatter.minimumFractionDigits = digits
        // Rounded here too: not every Foundation honours the fraction digits.
        let rounded = digits == 0 ? value.rounded() : (value * 10).rounded() / 10
        return self[unit, formatter.string(from: NSNumber(value: rounded)) ?? String(rounded)]
    }

    /// A number as the person's locale writes it (1,234 · 1.234 · 1 234).
    func number(_ value: Int64) -> String {
        let formatter = NumberFormatter()
        formatter.locale = locale
        formatter.numberStyle = .decimal
        return formatter.string(from: NSNumber(value: value)) ?? "\(value)"
    }

    func number(_ value: Int) -> String { number(Int64(value)) }
}

/// CLDR plural categories for whole numbers, in the languages Outpost speaks.
enum PluralCategory: String {
    case one, few, many, other

    init(_ count: Int, language: String) {
        switch language {
        case "ru":
            let (ten, hundred) = (count % 10, count % 100)
            if ten == 1 && hundred != 11 {
                self = .one
            } else if (2...4).contains(ten) && !(12...14).contains(hundred) {
                self = .few
            } else {
                self = .many
            }
        default:
            self = count == 1 ? .one : .other
        }
    }
}
