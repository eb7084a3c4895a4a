// The types an embedder names when it runs a server in its own process
// (`SyncServer(database:config:clock:)`, tokens, collections), re-exported so
// that `import OutpostServer` is the only import it needs: OutpostCore is
// not a product of the package.

@_exported public import struct OutpostCore.CollectionSchema
@_exported public import struct OutpostCore.FieldSchema
@_exported public import enum OutpostCore.FieldType
@_exported public import enum OutpostCore.ConflictPolicy
@_exported public import enum OutpostCore.FieldNaming
@_exported public import enum OutpostCore.Role
@_exported public import struct OutpostCore.ErrorBody
@_exported public import struct OutpostCore.ErrorCode
@_exported public import protocol OutpostCore.WallClock
@_exported public import struct OutpostCore.SystemWallClock
@_exported public import enum OutpostCore.JSONValue
@_exported public import typealias OutpostCore.JSONObject
@_exported public import struct OutpostCore.ServerTimestamp
