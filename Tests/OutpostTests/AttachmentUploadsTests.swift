import Foundation
import Outpost
import OutpostCore
import Testing

/// Attachment uploads' state alone: piece sizes and bytes sent.
@Suite("Attachment uploads", .timeLimit(.minutes(1)))
struct AttachmentUploadsTests {
    @Test func piecesGrowOnAFastLinkAndShrinkOnASlowOne() {
        var uploads = AttachmentUploads()
        let start = uploads.pieceBytes
        uploads.pieceAnswered(bytes: start, took: .milliseconds(100), requestTimeout: 30)
        #expect(uploads.pieceBytes == start * 2)
        uploads.pieceAnswered(bytes: uploads.pieceBytes, took: .seconds(5), requestTimeout: 30)
        #expect(uploads.pieceBytes == start * 2, "neither fast nor slow: kept")
        uploads.pieceAnswered(bytes: uploads.pieceBytes, took: .seconds(10), requestTimeout: 30)
        #expect(uploads.pieceBytes == start)
        #expect(uploads.bytesSent == Int64(start + start * 2 + start * 2), "every piece counts")
    }

    @Test func aShortLastPieceSaysNothingAboutTheLink() {
        var uploads = AttachmentUploads()
        let start = uploads.pieceBytes
        uploads.pieceAnswered(bytes: 1_000, took: .milliseconds(1), requestTimeout: 30)
        #expect(uploads.pieceBytes == start)
        #expect(uploads.bytesSent == 1_000)
    }

    @Test func piecesStayWithinTheirBounds() {
        var uploads = AttachmentUploads()
        for _ in 0..<10 { uploads.pieceAnswered(bytes: uploads.pieceBytes, took: .zero, requestTimeout: 30) }
        #expect(uploads.pieceBytes == AttachmentUploads.largestPiece)
        for _ in 0..<10 { uploads.pieceFailed(bytes: 10, .noAnswer) }
        #expect(uploads.pieceBytes == AttachmentUploads.smallestPiece)
    }

    @Test func onlyACutShrinksThePieceButEveryTryCounts() {
        var uploads = AttachmentUploads()
        let start = uploads.pieceBytes
        uploads.pieceFailed(bytes: 500, .serverBusy(retryAfter: nil))
        #expect(uploads.pieceBytes == start, "a busy server says nothing about the link")
        uploads.pieceFailed(bytes: 500, .noAnswer)
        #expect(uploads.pieceBytes == start / 2)
        #expect(uploads.bytesSent == 1_000, "bytes resent count too")
    }
}
