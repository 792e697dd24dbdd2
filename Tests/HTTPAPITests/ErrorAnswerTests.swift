import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing
@testable import HTTPAPI
import Ledger
@testable import SubledgerApp
import SubledgerAppTesting

/// One mapping from errors to HTTP: what the router answers for an error is
/// what the audit records of it. Before, an App Store API failure answered
/// 503 and was audited as 500, and a Google Play API failure that reached
/// the middleware answered 500.
struct ErrorAnswerTests {
    static let errors: [(name: String, error: any Error, status: Int)] = [
        ("ledger", LedgerError.invalidField("quantity", expected: "1 to 1,000,000"), 400),
        ("service", ServiceError(.notConfigured, code: .appStoreAPINotConfigured, message: "not configured"), 503),
        ("appstore", AppStoreAPIError(.unavailable, message: "Apple answered 503"), 503),
        ("appstore-unreachable", AppStoreAPIError(.unreachable, message: "no route"), 502),
        ("googleplay", GooglePlayAPIError(.unavailable, message: "Google answered 503"), 503),
        ("googleplay-rejected", GooglePlayAPIError(.rejected, message: "Google refused"), 502),
        ("contention", WriteContention(subscriberIDs: ["ann"]), 503),
        ("http", HTTPError(.notFound), 404),
        ("unexpected", CocoaError(.fileNoSuchFile), 500),
    ]

    /// The codes only the HTTP edge answers keep their wire strings.
    @Test func theEdgeCodesAreTheDocumentedOnes() {
        #expect(ErrorCode.http(418).rawValue == "http_418")
        #expect(ErrorCode.methodNotAllowed.rawValue == "method_not_allowed")
        #expect(APIError.requestTimeout.code == .requestTimeout && ErrorCode.requestTimeout.rawValue == "request_timeout")
    }

    @Test func theAnswerAndTheAuditAgreeForEveryKindOfError() async throws {
        let router = Router()
        router.add(middleware: ErrorMiddleware(logger: Logger(label: "error-answer-tests"), maximumBodySize: 1 << 20))
        router.get("/fail/:name") { _, context -> Response in
            let name = try context.parameters.require("name")
            throw Self.errors.first { $0.name == name }!.error
        }
        try await Application(router: router).test(.router) { client in
            for (name, error, status) in Self.errors {
                try await client.execute(uri: "/fail/\(name)", method: .get) { response in
                    #expect(Int(response.status.code) == status, "\(name): answered \(response.status.code)")
                    #expect(AuditRecord.status(of: error) == Int(response.status.code), "\(name): audited otherwise")
                    let body = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: [String: String]]
                    #expect(body?["error"]?["code"]?.isEmpty == false, "\(name): no error code")
                }
            }
        }
    }
}
