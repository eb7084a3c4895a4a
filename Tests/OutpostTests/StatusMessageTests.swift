import Foundation
import Outpost
import OutpostCore
import Testing

/// The status bar's sentence for every situation, in every language the
/// library speaks: each exists, is that language's own, and carries its
/// numbers and dates in the locale's format.
@Suite("Status sentences in five languages", .timeLimit(.minutes(2)))
struct StatusMessageTests {
    static let utc = TimeZone(identifier: "UTC")!
    static let updated = ServerTimestamp(rawValue: "2026-08-03T09:42:00.000000Z")

    /// One status per branch of the sentence, named.
    static var situations: [(name: String, status: SyncStatus)] {
        func status(_ change: (inout SyncStatus) -> Void) -> SyncStatus {
            var status = SyncStatus()
            change(&status)
            return status
        }
        let synced: (inout SyncStatus) -> Void = { $0.lastSyncedAt = ["people": updated] }
        var list: [(String, SyncStatus)] = [
            ("session expired, one change", status { $0.signInRequired = true; $0.pending = 1 }),
            ("session expired, changes", status { $0.signInRequired = true; $0.pending = 4 }),
            ("access revoked", status { $0.lastError = .accessRevoked }),
            ("update required", status { $0.updateRequired = true; $0.pending = 2 }),
            ("downloading", status { $0.isSyncing = true; $0.progress = SyncProgress(done: 1_200, total: 235_613) }),
            ("slow", status { $0.connectivity = .degraded }),
            ("slow, data shown", status { $0.connectivity = .degraded; synced(&$0) }),
            ("syncing", status { $0.connectivity = .online; $0.isSyncing = true }),
            ("all sent", status { $0.connectivity = .online; synced(&$0) }),
            ("checking", status { $0.connectivity = .unknown }),
            ("not synced", status { $0.connectivity = .online }),
        ]
        for unsent in [0, 1, 3] {
            list.append(("offline, seen, \(unsent) unsent", status { $0.connectivity = .offline; $0.pending = unsent; synced(&$0) }))
            list.append(("offline, nothing yet, \(unsent) unsent", status { $0.connectivity = .offline; $0.pending = unsent }))
        }
        for count in [1, 2, 5, 21, 1_234] {
            list.append(("slow, \(count) unsent", status { $0.connectivity = .degraded; $0.pending = count }))
            list.append(("\(count) rejected", status { $0.connectivity = .online; $0.rejected = count }))
            list.append(("\(count) conflicts", status { $0.connectivity = .online; $0.conflicts = count }))
            list.append(("\(count) waiting", status { $0.connectivity = .online; $0.pending = count }))
        }
        return list
    }

    @Test(arguments: StatusMessage.languages)
    func everySituationHasASentenceInTheLanguage(_ language: String) throws {
        let locale = Locale(identifier: language)
        let english = Locale(identifier: "en")
        var seen: Set<String> = []
        for (name, status) in Self.situations {
            let text = StatusMessage.text(for: status, timeZone: Self.utc, locale: locale)
            #expect(!text.isEmpty && !text.contains("%") && !text.hasPrefix("offline.") && !text.contains("."
                + "single"), "\(language), \(name): \(text)")
            if language != "en" {
                let inEnglish = StatusMessage.text(for: status, timeZone: Self.utc, locale: english)
                #expect(text != inEnglish, "\(language), \(name) is still English: \(text)")
            }
            seen.insert(text)
        }
        #expect(seen.count >= Self.situations.count - 2, "situations read differently in \(language)")
    }

    @Test(arguments: StatusMessage.languages)
    func everyLiveChannelStateHasItsOwnSentence(_ language: String) {
        let locale = Locale(identifier: language)
        let states: [LiveChannelState] = [.off, .connecting, .live, .polling]
        var seen: Set<String> = []
        for state in states {
            var status = SyncStatus()
            status.live = state
            let text = StatusMessage.liveText(for: status, locale: locale)
            #expect(!text.isEmpty && !text.hasPrefix("live."), "\(language), \(state): \(text)")
            if language != "en" {
                #expect(text != StatusMessage.liveText(for: status, locale: Locale(identifier: "en")), "\(language), \(state) is English")
            }
            seen.insert(text)
        }
        #expect(seen.count == states.count)
    }

    @Test func numbersAndDatesFollowTheLocale() {
        var many = SyncStatus()
        many.connectivity = .online
        many.pending = 12_345
        #expect(StatusMessage.text(for: many, locale: Locale(identifier: "en")) == "12,345 changes are waiting to be sent.")
        #expect(StatusMessage.text(for: many, locale: Locale(identifier: "it")) == "12.345 modifiche sono in attesa di invio.")
        var sent = SyncStatus()
        sent.connectivity = .online
        sent.lastSyncedAt = ["people": Self.updated]
        #expect(StatusMessage.text(for: sent, timeZone: Self.utc, locale: Locale(identifier: "en_GB"))
            == "All changes sent. Data updated on 3 Aug at 09:42.")
        let italian = StatusMessage.text(for: sent, timeZone: Self.utc, locale: Locale(identifier: "it_IT"))
        #expect(italian.hasPrefix("Tutte le modifiche inviate. Dati aggiornati al 3 ago") && italian.hasSuffix("alle 09:42."), "\(italian)")
        let russian = StatusMessage.text(for: sent, timeZone: Self.utc, locale: Locale(identifier: "ru_RU"))
        #expect(russian.contains("авг") && russian.contains("в 09:42"), "\(russian)")
        // A language Outpost does not speak reads English.
        #expect(StatusMessage.text(for: many, locale: Locale(identifier: "de_DE")).hasSuffix("changes are waiting to be sent."))
    }

    @Test func russianPluralsFollowTheirRules() {
        func waiting(_ count: Int) -> String {
            var status = SyncStatus()
            status.connectivity = .online
            status.pending = count
            return StatusMessage.text(for: status, locale: Locale(identifier: "ru"))
        }
        #expect(waiting(1) == "1 изменение ждёт отправки.")
        #expect(waiting(21) == "21 изменение ждёт отправки.")
        #expect(waiting(3) == "3 изменения ждут отправки.")
        #expect(waiting(12) == "12 изменений ждут отправки.")
        #expect(waiting(25) == "25 изменений ждут отправки.")
    }

    @Test(arguments: StatusMessage.languages)
    func attachmentsWaitingUploadingAndRefusedReadInTheLanguage(_ language: String) {
        let locale = Locale(identifier: language)
        func attachments(_ change: (inout SyncStatus) -> Void) -> SyncStatus {
            var status = SyncStatus()
            status.connectivity = .online
            change(&status)
            return status
        }
        let situations: [(String, SyncStatus)] = [1, 3, 5, 21].flatMap { count in
            [
                ("\(count) waiting", attachments { $0.attachments.waiting = count; $0.attachments.bytesWaiting = 4_200_000 * Int64(count) }),
                ("\(count) refused", attachments { $0.attachments.failed = count }),
            ]
        } + [
            ("uploading", attachments {
                $0.isUploadingAttachments = true
                $0.attachments.waiting = 2
                $0.attachments.bytesToUpload = 8_000_000
                $0.attachments.bytesUploaded = 3_100_000
            })
        ]
        var seen: Set<String> = []
        for (name, status) in situations {
            let text = StatusMessage.attachmentText(for: status, locale: locale) ?? ""
            #expect(!text.isEmpty && !text.contains("%") && !text.hasPrefix("attachments.") && !text.contains("size."), "\(language), \(name): \(text)")
            if language != "en" {
                #expect(text != StatusMessage.attachmentText(for: status, locale: Locale(identifier: "en")), "\(language), \(name) is English")
            }
            seen.insert(text)
        }
        #expect(seen.count == situations.count)
        #expect(StatusMessage.attachmentText(for: SyncStatus(), locale: locale) == nil, "nothing to say when nothing waits")
    }

    @Test func attachmentSentencesGiveCountsAndSizes() {
        var status = SyncStatus()
        status.attachments.waiting = 2
        status.attachments.bytesWaiting = 4_230_000
        let english = Locale(identifier: "en")
        #expect(StatusMessage.attachmentText(for: status, locale: english) == "2 photos or files (4.2 MB) are waiting to upload.")
        status.attachments.waiting = 1
        status.attachments.bytesWaiting = 812_000
        #expect(StatusMessage.attachmentText(for: status, locale: english) == "1 photo or file (812 KB) is waiting to upload.")
        #expect(StatusMessage.attachmentText(for: status, locale: Locale(identifier: "it")) == "1 foto o file (812 kB) in attesa di caricamento.")
        status.isUploadingAttachments = true
        status.isSyncing = true
        status.attachments.bytesToUpload = 8_000_000
        status.attachments.bytesUploaded = 3_150_000
        #expect(StatusMessage.text(for: status, locale: english) == "Uploading photos and files: 3.2 MB of 8.0 MB.")
        status.attachments.waiting = 3
        status.attachments.bytesWaiting = 1_500_000
        status.isUploadingAttachments = false
        #expect(StatusMessage.attachmentText(for: status, locale: Locale(identifier: "ru")) == "3 фото или файла (1,5 МБ) ждут отправки.")
    }

    /// Every key English has, every language has (no sentence falls back
    /// to English in silence).
    @Test func everyLanguageHasEveryKey() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        func keys(_ language: String) throws -> Set<String> {
            let text = try String(
                contentsOf: root.appendingPathComponent("Sources/Outpost/Resources/\(language).lproj/Localizable.strings"), encoding: .utf8)
            return Set(text.split(separator: "\n").compactMap { line in
                line.hasPrefix("\"") ? line.split(separator: "\"").first.map(String.init) : nil
            })
        }
        let english = try keys("en")
        for language in StatusMessage.languages {
            let own = try keys(language)
            // Russian adds plural forms English has no use for; it lacks none.
            #expect(english.subtracting(own).subtracting(english.filter { $0.hasSuffix(".other") && language == "ru" }).isEmpty,
                "\(language) lacks \(english.subtracting(own).sorted())")
        }
    }
}
