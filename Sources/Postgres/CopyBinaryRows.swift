/// Rows in the binary format of COPY (`COPY … FROM STDIN WITH (FORMAT
/// binary)`): a signature and header, then per row the number of fields and
/// each field as its length and its value in the type's binary form, then a
/// trailer. The server reads it without parsing text: a timestamp is eight
/// bytes rather than a date to parse, a text value needs no escapes. Each
/// value must have the column's type exactly (the server does not convert).
public struct CopyBinaryRows: Sendable {
    private var bytes: [UInt8]
    public private(set) var count = 0

    /// "PGCOPY\n\xff\r\n\0", flags 0, no header extension.
    private static let header: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [0, 0, 0, 0] + [0, 0, 0, 0]
    /// The OID of `text`, the element type of a `text[]` value.
    private static let textOID: Int32 = 25

    public init(reservingCapacity capacity: Int = 0) {
        bytes = Self.header
        bytes.reserveCapacity(capacity + Self.header.count + 2)
    }

    public var isEmpty: Bool { count == 0 }

    /// The rows and the trailer, ready to send.
    public var finished: [UInt8] {
        var all = bytes
        Self.put(Int16(-1), into: &all)
        return all
    }

    /// Starts a row of `fields` values; exactly that many appends follow.
    public mutating func beginRow(fields: Int) {
        Self.put(Int16(fields), into: &bytes)
        count += 1
    }

    /// A `text` value.
    public mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            Self.put(Int32(utf8.count), into: &bytes)
            bytes.append(contentsOf: utf8)
        }
    }

    public mutating func append(_ text: String?) {
        if let text { append(text) } else { appendNull() }
    }

    /// A `boolean` value.
    public mutating func append(_ flag: Bool) {
        Self.put(Int32(1), into: &bytes)
        bytes.append(flag ? 1 : 0)
    }

    /// A `timestamptz` value, given in milliseconds since 1970-01-01 UTC.
    public mutating func append(unixMilliseconds milliseconds: Int64) {
        Self.put(Int32(8), into: &bytes)
        Self.put((milliseconds - PostgresRawRow.secondsFrom1970To2000 * 1000) * 1000, into: &bytes)
    }

    /// A one-dimensional `text[]` value without NULL elements.
    public mutating func append(array elements: [String]) {
        var value: [UInt8] = []
        Self.put(Int32(elements.isEmpty ? 0 : 1), into: &value)  // dimensions
        Self.put(Int32(0), into: &value)                         // no NULL element
        Self.put(Self.textOID, into: &value)
        if !elements.isEmpty {
            Self.put(Int32(elements.count), into: &value)
            Self.put(Int32(1), into: &value)                     // lower bound
            for element in elements {
                var element = element
                element.withUTF8 { utf8 in
                    Self.put(Int32(utf8.count), into: &value)
                    value.append(contentsOf: utf8)
                }
            }
        }
        Self.put(Int32(value.count), into: &bytes)
        bytes.append(contentsOf: value)
    }

    /// An `integer` value.
    public mutating func append(integer value: Int32) {
        Self.put(Int32(4), into: &bytes)
        Self.put(value, into: &bytes)
    }

    /// A `bytea` value.
    public mutating func append(bytes value: [UInt8]) {
        Self.put(Int32(value.count), into: &bytes)
        bytes.append(contentsOf: value)
    }

    public mutating func appendNull() {
        Self.put(Int32(-1), into: &bytes)
    }

    private static func put<Integer: FixedWidthInteger>(_ value: Integer, into buffer: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { buffer.append(contentsOf: $0) }
    }
}
