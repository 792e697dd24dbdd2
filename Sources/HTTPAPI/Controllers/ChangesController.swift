import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// `GET /v1/changes?after=&limit=&types=&subscriberId=&wait=` (support,
/// admin): the change feed in one global order, with long-polls.
struct ChangesController {
    let reader: ChangeFeedReader
    let keys: APIKeys
    /// `SUBLEDGER_CHANGES_MAX_WAIT`: a longer `wait` is held this long.
    let maximumWait: Duration

    func addRoutes(to router: Router<AppRequestContext>) {
        router.group("v1/changes")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(use: list)
    }

    @Sendable func list(request: Request, context: AppRequestContext) async throws -> Response {
        var filter = try Self.filter(request)
        filter.wait = min(filter.wait, maximumWait)
        let page = try await reader.page(filter)
        // The stored bodies are JSON already: written as they are.
        var bytes = Array("{\"changes\":[".utf8)
        for (index, change) in page.changes.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += Array(change.utf8)
        }
        bytes += Array("],\"nextCursor\":\"\(page.next.token)\"}".utf8)
        return .json(bytes: bytes)
    }

    static func filter(_ request: Request) throws(LedgerError) -> ChangeFeedReader.Filter {
        let query = request.uri.queryParameters
        var filter = ChangeFeedReader.Filter()
        if let after = query.get("after"), !after.isEmpty {
            guard let cursor = ChangeCursor(token: after) else {
                throw LedgerError.invalidField("after", expected: "the nextCursor of a previous answer, unchanged")
            }
            filter.after = cursor
        }
        filter.limit = try RequestInput.limit(in: request, default: 100, range: 1...1000)
        if let types = query.get("types") {
            let names = types.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            for name in names where !Self.isTypeName(name) {
                throw LedgerError.invalidField("types", expected: "comma-separated change types (snake_case, e.g. purchased,entitlement_lost)",
                                               got: String(name.prefix(64)))
            }
            filter.types = names
        }
        filter.subscriberID = try RequestInput.subscriberID(in: request)
        if let wait = query.get("wait") {
            guard let seconds = Int(wait), (0...30).contains(seconds) else {
                throw LedgerError.invalidField("wait", expected: "a whole number of seconds from 0 to 30", got: String(wait.prefix(64)))
            }
            filter.wait = .seconds(seconds)
        }
        return filter
    }

    /// A change type: 1–64 lowercase letters, digits and underscores.
    static func isTypeName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_") }
    }
}
