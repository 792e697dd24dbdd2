import CLibPQ
import Foundation

/// One statement's bind values laid out as `PQexecParams` and
/// `PQsendQueryParams` take them; valid only inside `Connection.withParameters`.
struct Parameters {
    var count: Int32 = 0
    var types: [Oid] = []
    var values: [UnsafePointer<CChar>?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
}

extension Connection {
    /// `text`'s type OID (`TEXTOID` in the server's `pg_type.h`).
    static let textTypeOID: Oid = 25

    /// Copies each statement's binds into buffers libpq reads by length, runs
    /// `body`, then frees them. Everything is copied before `body` runs, so a
    /// value libpq cannot send fails before a pipeline is half sent.
    ///
    /// libpq reads a text-format parameter as a C string and ignores its
    /// length, so a value holding a NUL would reach the server cut short: a
    /// lookup of "T1\0x" would find "T1". Such a value goes in binary format,
    /// which libpq sends by its length, declared `text`, whose binary form is
    /// its UTF-8 bytes: the server sees the NUL and refuses the statement
    /// (22021), as it refuses a NUL in any text. Every other value stays in
    /// text format with its type left to the server to infer, as before.
    /// Sending everything in binary would be wrong: the binary form of an
    /// `int4` or a `uuid` is not its digits, and a string the server reads as
    /// one of those would be taken for another value rather than refused.
    static func withParameters<R>(
        _ statements: [[String?]], _ body: ([Parameters]) throws(PostgresError) -> R
    ) throws(PostgresError) -> R {
        var buffers = [UnsafeMutablePointer<CChar>]()
        defer { for buffer in buffers { buffer.deallocate() } }
        var laidOut = [Parameters]()
        laidOut.reserveCapacity(statements.count)
        for binds in statements {
            var parameters = Parameters()
            for bind in binds {
                guard let bind else {
                    parameters.append(type: 0, value: nil, length: 0, format: 0)
                    continue
                }
                // UTF-8 and a terminating NUL; a NUL inside the string stays.
                // Copied in one pass (a memory copy for a native string), and
                // searched for a NUL by the C library: a batch document is
                // hundreds of kilobytes.
                let length = bind.utf8.count
                guard let wireLength = Int32(exactly: length) else {
                    throw PostgresError(code: .invalidState, message: "a parameter of \(length) bytes is more than libpq can send")
                }
                let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: length + 1)
                let value = UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: CChar.self)
                buffers.append(value)
                _ = UnsafeMutableBufferPointer(start: buffer, count: length).initialize(from: bind.utf8)
                buffer[length] = 0
                let holdsNUL = strlen(value) < length
                parameters.append(
                    type: holdsNUL ? textTypeOID : 0, value: UnsafePointer(value),
                    length: wireLength, format: holdsNUL ? 1 : 0)
            }
            laidOut.append(parameters)
        }
        return try body(laidOut)
    }
}

extension Parameters {
    fileprivate mutating func append(type: Oid, value: UnsafePointer<CChar>?, length: Int32, format: Int32) {
        count += 1
        types.append(type)
        values.append(value)
        lengths.append(length)
        formats.append(format)
    }
}
