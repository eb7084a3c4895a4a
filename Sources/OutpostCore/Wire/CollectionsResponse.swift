/// The answer of `GET /v1/collections`: every collection the server syncs,
/// with its fields, so a generic client (the CLI) can keep collections it
/// was not built with, such as the app's own tables.
package struct CollectionsResponse: Sendable, Equatable, Codable {
    package var collections: [CollectionSchema]

    package init(collections: [CollectionSchema]) { self.collections = collections }
}
