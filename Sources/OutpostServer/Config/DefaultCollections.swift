public import OutpostCore

/// The collections `outpost serve` offers when no `--config` is given
/// (docs/protocol.md, "Collections"): field-captured people, their visits, and
/// read-only catalogs.
public enum DefaultCollections {
    public static let people = CollectionSchema(
        name: "people",
        fields: [
            "name": FieldSchema(.text, required: true),
            "phone": FieldSchema(.text),
            "address": FieldSchema(.text),
            "notes": FieldSchema(.text),
            "section": FieldSchema(.integer),
            "created_at": FieldSchema(.timestamp),
        ],
        windowField: "created_at")

    public static let visits = CollectionSchema(
        name: "visits",
        fields: [
            "person": FieldSchema(.reference(collection: "people"), required: true),
            "visited_at": FieldSchema(.timestamp, required: true),
            "notes": FieldSchema(.text),
            "photo": FieldSchema(.attachment),
        ],
        windowField: "visited_at")

    public static let catalogs = CollectionSchema(
        name: "catalogs",
        fields: [
            "catalog": FieldSchema(.text, required: true),
            "code": FieldSchema(.text, required: true),
            "name": FieldSchema(.text, required: true),
        ],
        readOnly: true)

    public static let all: [CollectionSchema] = [people, visits, catalogs]
}
