/// The escapes of a JSON string (RFC 8259, section 7), read the same way by
/// both hand-written parsers: of stored payloads (`StoredPayloadParser`)
/// and of request bodies (`JSONValue.parse`).
package enum JSONStringEscape {
    /// Appends to `text` the UTF-8 of the escape whose backslash was just
    /// read (`position` is the byte after it), and returns the position
    /// after the escape; nil when it is not one: an unknown letter, fewer
    /// than four hex digits, or a lone surrogate.
    static func unescape<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at position: Int, into text: inout [UInt8]) -> Int?
    where Bytes.Index == Int {
        guard position < bytes.endIndex else { return nil }
        let escape = bytes[position]
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
        case UInt8(ascii: "b"): text.append(0x08)
        case UInt8(ascii: "f"): text.append(0x0C)
        case UInt8(ascii: "n"): text.append(0x0A)
        case UInt8(ascii: "r"): text.append(0x0D)
        case UInt8(ascii: "t"): text.append(0x09)
        case UInt8(ascii: "u"):
            var next = position + 5
            guard var scalar = hexQuad(bytes, at: position + 1) else { return nil }
            if (0xD800..<0xDC00).contains(scalar) {
                guard next + 6 <= bytes.endIndex, bytes[next] == UInt8(ascii: "\\"), bytes[next + 1] == UInt8(ascii: "u"),
                      let low = hexQuad(bytes, at: next + 2), (0xDC00..<0xE000).contains(low)
                else { return nil }
                next += 6
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { return nil }
            text.append(contentsOf: unicode.utf8)
            return next
        default:
            return nil
        }
        return position + 1
    }

    /// `unescape` of a buffer, compiled here for it: called from another
    /// module, the generic one would run unspecialised (every stored
    /// payload with an escape is read through this).
    package static func unescape(utf8 bytes: UnsafeBufferPointer<UInt8>, at position: Int, into text: inout [UInt8]) -> Int? {
        unescape(bytes, at: position, into: &text)
    }

    private static func hexQuad<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at start: Int) -> UInt32?
    where Bytes.Index == Int {
        guard start + 4 <= bytes.endIndex else { return nil }
        var value: UInt32 = 0
        for byte in bytes[start..<start + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}
