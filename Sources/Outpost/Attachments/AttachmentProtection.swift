package import Foundation
package import OutpostSQLite

/// The store's file protection class, as Foundation names it for the
/// attachment files: SQLite applies the class to the database files itself,
/// the blob folder has to ask for it. Without this a store opened with
/// `.complete` keeps its records unreadable while the device is locked and
/// its photos readable.
extension FileProtection {
    /// The Foundation protection type of the same class.
    package var fileProtectionType: FileProtectionType {
        switch self {
        case .complete: return .complete
        case .untilFirstUnlock: return .completeUntilFirstUserAuthentication
        case .none: return .none
        }
    }

    /// Attributes that give a new file or folder this class. Foundation
    /// ignores them where the system has no data protection (Linux, macOS
    /// outside a sandboxed container), so they are passed everywhere.
    package var fileAttributes: [FileAttributeKey: Any] {
        [.protectionKey: fileProtectionType]
    }
}
