import Ledger

// The codes only the HTTP edge answers: nothing below it builds them.
extension ErrorCode {
    /// The route exists, not with this method (405).
    public static let methodNotAllowed = ErrorCode(rawValue: "method_not_allowed")
    /// A request's head and body did not arrive within `SUBLEDGER_HTTP_READ_TIMEOUT` (408).
    public static let requestTimeout = ErrorCode(rawValue: "request_timeout")

    /// Another status of the HTTP framework, e.g. `http_408`.
    public static func http(_ status: Int) -> ErrorCode { ErrorCode(rawValue: "http_\(status)") }
}
