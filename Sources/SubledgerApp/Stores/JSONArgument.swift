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

    /// A JSON array of objects with the string fields `keys`, one object a
    /// row of values (in the keys' order): rows a statement reads with
    /// `jsonb_array_elements(…) e` as `e->>'key'`.
    static func objects(_ keys: [String], _ rows: some Sequence<[String]>) -> PostgresJSON {
        let names = keys.map { string($0) + ":" }
        return PostgresJSON(text: "[" + rows.map { values in
            "{" + zip(names, values).map { $0 + string($1) }.joined(separator: ",") + "}"
        }.joined(separator: ",") + "]")
    }
}
