public import Foundation
public import OutpostCore

/// Where one attachment stands on this device.
public enum AttachmentState: Sendable, Equatable, CustomStringConvertible {
    /// Attached here; its bytes wait to be uploaded (its record's change waits with them).
    case waiting
    /// Partly uploaded: the server holds the first `bytesSent` bytes.
    case uploading(bytesSent: Int64, totalBytes: Int64)
    /// The server refused it for good; its record shows as refused. Attach the file again to retry.
    case failed(reason: String)
    /// On the server and on this device.
    case onDevice
    /// On the server, not on this device (never downloaded, or evicted to
    /// stay within the storage budget): ``LocalStore/attachmentData(_:)`` downloads it.
    case notDownloaded

    public var description: String {
        switch self {
        case .waiting: return "waiting to upload"
        case .uploading(let sent, let total): return "uploading (\(sent) of \(total) bytes)"
        case .failed(let reason): return "upload failed: \(reason)"
        case .onDevice: return "on this device"
        case .notDownloaded: return "not downloaded"
        }
    }
}

/// The attachments waiting for the server, for a status line.
public struct AttachmentSummary: Sendable, Equatable {
    /// Files not uploaded yet (partly uploaded ones included).
    public var waiting = 0
    /// Bytes of those files the server does not hold yet.
    public var bytesWaiting: Int64 = 0
    /// Bytes of those files in all, and how many of them the server holds:
    /// the upload's progress.
    public var bytesToUpload: Int64 = 0
    /// Bytes of the waiting files the server holds already.
    public var bytesUploaded: Int64 = 0
    /// Files the server refused for good.
    public var failed = 0
    /// Bytes of attachment files kept on this device.
    public var bytesOnDevice: Int64 = 0

    /// Creates a summary with nothing waiting.
    public init() {}

    /// The upload's share done, from 0 to 1; 1 when nothing waits.
    public var fraction: Double { bytesToUpload > 0 ? Double(bytesUploaded) / Double(bytesToUpload) : 1 }
}

/// How far a download has got.
public struct AttachmentProgress: Sendable, Equatable {
    /// Bytes received so far.
    public var bytesDone: Int64
    /// The attachment's size.
    public var totalBytes: Int64

    /// Creates a progress of `bytesDone` out of `totalBytes`.
    public init(bytesDone: Int64, totalBytes: Int64) {
        self.bytesDone = bytesDone
        self.totalBytes = totalBytes
    }

    /// The share done, from 0 to 1.
    public var fraction: Double { totalBytes > 0 ? min(1, Double(bytesDone) / Double(totalBytes)) : 1 }
}

/// An attachment's bytes on their way: its progress as an `AsyncSequence`,
/// then ``data`` once they are here. Bytes already on the device come at
/// once; others are downloaded by the store's sync engine and kept.
///
/// ```swift
/// let download = await store.attachmentData(visit.photo)
/// for try await step in download { progressBar.value = step.fraction }
/// let image = UIImage(data: try await download.data)
/// ```
public struct AttachmentDownload: AsyncSequence, Sendable {
    /// Each step: the bytes received so far out of the whole.
    public typealias Element = AttachmentProgress
    /// The attachment being fetched.
    public let attachment: AttachedFile
    let steps: AsyncThrowingStream<AttachmentProgress, any Error>
    let task: Task<Data, any Error>

    /// The bytes, when they are all here (checked against their hash).
    public var data: Data {
        get async throws { try await task.value }
    }

    /// Stops a download no one waits for any more (the bytes already here stay).
    public func cancel() { task.cancel() }

    public func makeAsyncIterator() -> AsyncThrowingStream<AttachmentProgress, any Error>.AsyncIterator {
        steps.makeAsyncIterator()
    }
}
