import Foundation
import Postgres

/// Lists passed to SQL as one `jsonb` parameter (`jsonb_array_elements`), so
/// a statement takes any number of values with one bind.
enum JSONArgument {
    /// A JSON string literal of `value`.
    static func string(_ value: String) -> String {
        let data = (try? JSONEncoder().encode(value)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// A JSON array of strings.
    static func strings(_ values: [String]) -> PostgresJSON {
        PostgresJSON(text: "[" + values.map(string).joined(separator: ",") + "]")
    }
}
