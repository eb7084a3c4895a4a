// The types an app names when it uses Outpost, re-exported so that
// `import Outpost` is the only import it needs. The wire protocol's own
// types (requests, pages, cursors) stay in OutpostCore.

@_exported public import enum OutpostCore.JSONValue
@_exported public import typealias OutpostCore.JSONObject
@_exported public import struct OutpostCore.ServerTimestamp
@_exported public import enum OutpostCore.MutationOp
@_exported public import enum OutpostCore.FieldNaming
@_exported public import struct OutpostCore.ErrorBody
@_exported public import struct OutpostCore.ErrorCode
@_exported public import struct OutpostCore.WireError
@_exported public import struct OutpostCore.CollectionSchema
@_exported public import enum OutpostCore.ConflictPolicy
@_exported public import struct OutpostCore.FieldSchema
@_exported public import enum OutpostCore.FieldType
@_exported public import protocol OutpostCore.WallClock
@_exported public import struct OutpostCore.SystemWallClock
@_exported public import protocol OutpostCore.IDGenerator
@_exported public import class OutpostCore.UUIDv7Generator
@_exported public import struct OutpostCore.AttachedFile
@_exported public import struct OutpostCore.WireRecord

@_exported public import struct OutpostSQLite.SQLiteError
@_exported public import enum OutpostSQLite.FileProtection
@_exported public import enum OutpostSQLite.Durability
