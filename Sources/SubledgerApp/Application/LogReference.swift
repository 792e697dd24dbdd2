import JSON

/// What a log line says instead of a subscriber id (`subscriber.ref`): the
/// id is personal data, and log files are kept elsewhere and for longer than
/// the ledger's rows, so a line names a subscriber by the first 12 hex
/// digits of the id's SHA-256 — the same digest the audit keeps of a key
/// (`APIKeys.fingerprint(of:)`). Whoever has an id finds its lines with
/// `printf %s "$ID" | sha256sum | cut -c1-12`; nobody reads an id from a line.
public enum LogReference {
    public static func subscriber(_ id: String) -> String {
        APIKeys.fingerprint(of: id.utf8)
    }

    /// A request path as a log line may hold it: the segment naming a
    /// subscriber (`/v1/subscribers/{id}/…`) replaced by `{id}`, the rest
    /// escaped (`UntrustedText`).
    public static func path(_ path: String) -> String {
        let prefix = "/v1/subscribers/"
        guard path.hasPrefix(prefix) else { return UntrustedText.escaped(path) }
        let rest = path.dropFirst(prefix.count)
        let tail = rest.firstIndex(of: "/").map { rest[$0...] } ?? ""
        return UntrustedText.escaped(prefix + "{id}" + tail)
    }
}
