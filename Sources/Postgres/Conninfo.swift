import Foundation

/// Helpers for connection strings, in either of libpq's two forms.
public enum Conninfo {
    /// The same server and credentials with another database: the URL's path
    /// replaced, or a `dbname` appended to a `key=value` string (libpq takes
    /// the last value of a repeated key).
    public static func replacingDatabase(in conninfo: String, with name: String) -> String {
        if conninfo.hasPrefix("postgres://") || conninfo.hasPrefix("postgresql://"),
            var components = URLComponents(string: conninfo) {
            components.path = "/" + name
            return components.string ?? conninfo
        }
        return conninfo + " dbname=\(name)"
    }
}
