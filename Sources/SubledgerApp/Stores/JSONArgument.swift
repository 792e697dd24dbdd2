import EventStore
import Foundation
import Postgres

/// Lists passed to SQL as one `jsonb` parameter (`jsonb_array_elements`), so
/// a statement takes any number of values with one bind.
enum JSONArgument {
    /// A JSON string literal of `value`.
    /// Written by hand: batches of an import quote thousands of these, and a
    /// `JSONEncoder` per string cost more than the statement they went into.
    static func string(_ value: String) -> String { JSONText.string(value) }

    /// A JSON array of strings.
    static func strings(_ values: [String]) -> PostgresJSON {
        PostgresJSON(text: "[" + values.map(string).joined(separator: ",") + "]")
    }
}
