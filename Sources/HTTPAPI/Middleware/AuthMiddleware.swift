import Hummingbird
import SubledgerApp

/// Requires an API key whose role allows `access`.
public struct AuthMiddleware: RouterMiddleware {
    public typealias Context = AppRequestContext
    let keys: APIKeys
    let access: Access

    public init(keys: APIKeys, access: Access) {
        self.keys = keys
        self.access = access
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The scheme is case-insensitive (RFC 6750 §2.1, RFC 9110 §11.1).
        guard let header = request.headers[.authorization], header.count > 7,
              header.prefix(7).lowercased() == "bearer "
        else { throw APIError.unauthorized }
        guard let role = keys.role(for: header.dropFirst(7)) else {
            throw APIError(.unauthorized, code: .unauthorized, message: "the API key is not valid")
        }
        guard access.allows(role) else { throw APIError.forbidden }
        var context = context
        context.role = role
        return try await next(request, context)
    }
}
