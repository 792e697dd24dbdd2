/// A JSON string literal, escaped the one way every writer of this project
/// escapes: `"` and `\` after a backslash, the five control characters
/// `JSONEncoder` writes short (`\b \f \n \r \t`) so, the other control
/// characters as `\u00xx`, everything else (slashes, non-ASCII) as it is —
/// the bytes of `JSONEncoder` with `.withoutEscapingSlashes`. Most values
/// (ids, names, environments) need no escape and are appended whole.
public enum JSONStringLiteral {
    /// Whether `value` holds a byte that must be escaped.
    @inlinable
    public static func needsEscape(_ value: String) -> Bool {
        value.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
    }

    /// Appends the literal of `value`, quotes included, to `bytes`.
    @inlinable
    public static func append(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        if needsEscape(value) { appendEscaped(value, to: &bytes) } else { bytes.append(contentsOf: value.utf8) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends the literal of `value`, quotes included, to `text`.
    @inlinable
    public static func append(_ value: String, to text: inout String) {
        text += "\""
        if needsEscape(value) {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(value.utf8.count + 16)
            appendEscaped(value, to: &bytes)
            text += String(decoding: bytes, as: UTF8.self)
        } else {
            text += value
        }
        text += "\""
    }

    /// The literal of `value`, quotes included.
    public static func quoted(_ value: String) -> String {
        var text = ""
        text.reserveCapacity(value.utf8.count + 2)
        append(value, to: &text)
        return text
    }

    /// `value`'s bytes escaped (without quotes). UTF-8 never uses a byte
    /// below 0x80 inside a longer character, so escaping bytes escapes
    /// characters.
    @usableFromInline
    static func appendEscaped(_ value: String, to bytes: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex.utf8Start[Int(byte >> 4)], hex.utf8Start[Int(byte & 0x0F)]])
            default: bytes.append(byte)
            }
        }
    }
}
