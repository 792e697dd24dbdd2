/// Text that came from outside (a request, an unverified payload, a
/// receiver's answer) made safe to log or store: control characters and
/// backslashes escaped (`\n`, `\u{1B}`), so a value cannot forge a log line
/// or a terminal sequence, and cut to `limit` UTF-8 bytes, so a value cannot
/// flood the log.
public enum UntrustedText {
    public static func escaped(_ text: some StringProtocol, limit: Int = 256) -> String {
        var result = ""
        var bytes = 0
        for scalar in text.unicodeScalars {
            let piece: String = switch scalar {
            case "\\": "\\\\"
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            case _ where scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
                || scalar.value == 0x2028 || scalar.value == 0x2029:
                "\\u{\(String(scalar.value, radix: 16))}"
            default: String(scalar)
            }
            bytes += piece.utf8.count
            guard bytes <= limit else {
                result += "…(\(text.utf8.count) bytes)"
                return result
            }
            result += piece
        }
        return result
    }

    /// `text` cut to `limit` UTF-8 bytes (on a character boundary) with a
    /// note of its length, otherwise unchanged: for a value that is escaped
    /// where it is written (a log line, a JSON answer) but must not be huge.
    public static func capped(_ text: String, limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var bytes = 0
        var end = text.startIndex
        for index in text.indices {
            let next = text.index(after: index)
            bytes += text[index..<next].utf8.count
            guard bytes <= limit else { break }
            end = next
        }
        return String(text[..<end]) + "…(\(text.utf8.count) bytes)"
    }
}
