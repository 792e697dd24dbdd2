import Hummingbird
import SubledgerApp

/// Applies the configured body limit to the request context.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let maximumBodySize: Int

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.maximumBodySize = maximumBodySize
        return try await next(request, context)
    }
}
