import Hummingbird
import Ledger
import SubledgerApp

extension APIError {
    /// What the client is answered for `error`: the one mapping from errors
    /// to HTTP. `ErrorMiddleware` answers it and the audit records its
    /// status, so the two cannot disagree. nil: an error nobody expected,
    /// answered 500 without detail.
    ///
    /// - Parameters: `method` and `path` name the route in the messages of
    ///   the router's own 404 and 405; `maximumBodySize` the limit a 413 names.
    static func answering(_ error: any Error, method: HTTPRequest.Method? = nil, path: String = "",
                          maximumBodySize: Int = 0) -> APIError? {
        switch error {
        case let error as APIError:
            return error
        case let error as LedgerError:
            return APIError(error)
        case let error as ServiceError:
            return APIError(error)
        case let error as any ServiceErrorConvertible:
            return APIError(error.serviceError)
        case let error as WriteContention:
            return APIError(.serviceUnavailable, code: .contention, message: error.description, retryAfter: 1)
        case let error as HTTPError:
            let method = method.map { "\($0)" }
            return switch error.status {
            case .contentTooLarge: .bodyTooLarge(limit: maximumBodySize)
            case .notFound: APIError(.notFound, code: .notFound, message: "no such route: \(method ?? "") \(path)")
            case .methodNotAllowed:
                APIError(.methodNotAllowed, code: .methodNotAllowed, message: "\(method ?? "the method") is not allowed on \(path)")
            default: APIError(error.status, code: .http(error.status.code), message: error.body ?? error.status.reasonPhrase)
            }
        case let error as any HTTPResponseError:
            return APIError(error.status, code: .http(error.status.code), message: error.status.reasonPhrase)
        default:
            switch DatabaseFailure(error) {
            case .unstorableValue(let sqlState)?:
                // A value the database cannot store or index: the input's fault.
                return APIError(.badRequest, code: .invalidField, message: "a value of the request cannot be stored (SQLSTATE \(sqlState))")
            case .unavailable(let reason)?:
                // A limit of the database or the database away: temporary, so 503 and not a server bug.
                return .databaseUnavailable(reason)
            case nil:
                return nil
            }
        }
    }

    /// The 500 of an unexpected error.
    static let internalError = APIError(.internalServerError, code: .internalError,
                                        message: "the server failed to answer; it has been logged")

    /// The 408 of a request whose head and body did not arrive in time.
    static let requestTimeout = APIError(.requestTimeout, code: .requestTimeout,
                                         message: "the request's head and body did not arrive in time")
}
