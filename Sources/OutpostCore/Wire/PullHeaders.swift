/// Headers a pull's answer carries beside its body.
package enum PullHeaders {
    /// The cursor of the page after this one (the body's `cursor`), sent
    /// only when `has_more` is true: a client may ask for that page while
    /// this one's body is still arriving. Optional; older clients ignore it.
    package static let nextCursor = "Outpost-Next-Cursor"
}
