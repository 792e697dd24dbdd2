import Foundation
import Postgres

/// Lists passed to SQL as one `jsonb` parameter (`jsonb_array_elements`), so
/// a statement takes any number of values with one bind.
enum JSONArgument {
    /// A JSON string literal of `value`.
    /// Written by hand: batches of an import quote thousands of these, and a
    /// `JSONEncoder` per string cost more than the statement they went into.
    static func string(_ value: String) -> String {
        var out = "\""
        out.reserveCapacity(value.utf8.count + 2)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A JSON array of strings.
    static func strings(_ values: [String]) -> PostgresJSON {
        PostgresJSON(text: "[" + values.map(string).joined(separator: ",") + "]")
    }
}
