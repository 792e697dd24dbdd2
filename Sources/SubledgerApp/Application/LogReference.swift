import JSON

/// What a log line says instead of a subscriber id (`subscriber.ref`): the
/// id is personal data, and log files are kept elsewhere and for longer than
/// the ledger's rows, so a line names a subscriber by 12 hex digits of the
/// id's HMAC under `SUBLEDGER_SECRET` (`InstallationSecret`, its own derived
/// key; SHA-256 when no secret is set). Whoever runs the service finds an
/// id's lines with `subledger log-reference ID`; whoever holds only the logs
/// can neither read an id from a line nor confirm a guessed one.
public enum LogReference {
    public static func subscriber(_ id: String, secret: InstallationSecret = .current) -> String {
        secret.digest(id.utf8, for: .logReference)
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
