import Foundation
import JSON
import Hummingbird
import Ledger
import Logging
import Metrics
import SubledgerApp

/// `GET /v1/products` (and its stable alias `/v1/products_v1.json`): the
/// catalog's product identifiers for apps, cacheable; no key, apps call it.
/// `POST /v1/products/invalid` (ingest, admin): identifiers the store reported
/// invalid on a device; `GET /v1/products/invalid` (support, admin) lists them.
struct ProductsController {
    let catalog: CatalogSource
    let invalidProducts: InvalidProductStore
    let keys: APIKeys
    let logger: Logger
    let listing: Listing

    init(catalog: CatalogSource, invalidProducts: InvalidProductStore, keys: APIKeys, logger: Logger) {
        self.catalog = catalog
        self.invalidProducts = invalidProducts
        self.keys = keys
        self.logger = logger
        self.listing = Listing(catalog: catalog)
    }

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("v1/products", use: products)
        router.get("v1/products_v1.json", use: products)
        router.group("v1/products/invalid")
            .add(middleware: AuthMiddleware(keys: keys, access: .write))
            .post(use: reportInvalid)
        router.group("v1/products/invalid")
            .add(middleware: AuthMiddleware(keys: keys, access: .support))
            .get(use: invalidReports)
    }

    /// The served list, computed once: a JSON array of identifiers in catalog
    /// order (what Apple's sample code reads), a strong ETag over those bytes
    /// and the catalog file's modification time.
    struct Listing: Sendable {
        var body: Data
        var etag: String
        var lastModified: Date
        /// `lastModified` as the header carries it, formatted once: a
        /// `DateFormatter` made per request (ICU loading its locale data)
        /// cost more CPU than everything else this route does.
        var lastModifiedHeader: String

        init(catalog: CatalogSource) {
            body = (try? JSONEncoder().encode(catalog.catalog.products.map(\.id))) ?? Data("[]".utf8)
            etag = "\"" + String(body.count, radix: 16) + "-" + String(fnv1a64(body), radix: 16) + "\""
            lastModified = Date(timeIntervalSince1970: catalog.modified.timeIntervalSince1970.rounded(.down))
            lastModifiedHeader = HTTPDate.format(lastModified)
        }

        /// Whether the client's cached copy is current (RFC 9110 §13.2.2:
        /// If-None-Match wins over If-Modified-Since when both are sent).
        func isNotModified(_ headers: HTTPFields) -> Bool {
            let tags = headers[values: .ifNoneMatch].flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces) }
            if !tags.isEmpty {
                return tags.contains { $0 == "*" || $0 == etag || $0 == "W/" + etag }
            }
            if let since = headers[.ifModifiedSince] {
                // A client echoing what it was sent needs no parsing.
                if since == lastModifiedHeader { return true }
                if let date = HTTPDate.parse(since) { return lastModified <= date }
            }
            return false
        }
    }

    @Sendable func products(request: Request, context: AppRequestContext) async throws -> Response {
        var headers: HTTPFields = [
            .eTag: listing.etag,
            .lastModified: listing.lastModifiedHeader,
            .cacheControl: "no-cache",
        ]
        if listing.isNotModified(request.headers) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: listing.body)))
    }

    // MARK: Invalid identifiers

    struct InvalidReport {
        var identifiers: [String]
        var deviceID: String?

        static func parse(_ data: Data) throws(LedgerError) -> InvalidReport {
            let reader = try FieldReader(body: data)
            guard let items = try reader.array("identifiers"), (1...1000).contains(items.count) else {
                throw LedgerError(kind: .badRequest, code: .invalidField,
                                  message: "Field 'identifiers' must be an array of 1 to 1000 product identifiers.", field: "identifiers")
            }
            var identifiers = [String]()
            for (index, item) in items.enumerated() {
                let itemReader = FieldReader(fields: ["identifier": item], prefix: "")
                guard let identifier = try? itemReader.identifier("identifier") else {
                    throw LedgerError(kind: .badRequest, code: .invalidField,
                                      message: "Field 'identifiers[\(index)]' must be a product identifier: 1 to 200 bytes of UTF-8 without control characters.",
                                      field: "identifiers[\(index)]")
                }
                identifiers.append(identifier)
            }
            return InvalidReport(identifiers: identifiers, deviceID: try reader.identifier("deviceId"))
        }
    }

    struct RecordedBody: Encodable {
        var recorded: Int
    }

    static let invalidIdentifiers = Counter(label: "subledger_invalid_product_identifiers_total")

    @Sendable func reportInvalid(request: Request, context: AppRequestContext) async throws -> Response {
        let report = try InvalidReport.parse(try await RequestInput.body(request, context))
        try await invalidProducts.record(report.identifiers, deviceID: report.deviceID)
        Self.invalidIdentifiers.increment(by: report.identifiers.count)
        logger.warning("the store reported product identifiers invalid", metadata: [
            "product.identifiers": "\(UntrustedText.escaped(report.identifiers.joined(separator: ","), limit: 1024))",
            "device.id": "\(UntrustedText.escaped(report.deviceID ?? "-"))",
        ])
        return try .json(RecordedBody(recorded: report.identifiers.count), status: .created)
    }

    struct InvalidListBody: Encodable {
        var identifiers: [InvalidProductStore.Summary]
    }

    @Sendable func invalidReports(request: Request, context: AppRequestContext) async throws -> Response {
        try .json(InvalidListBody(identifiers: try await invalidProducts.summaries(catalog: catalog.catalog)))
    }
}

/// HTTP dates (RFC 9110 IMF-fixdate), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
enum HTTPDate {
    static func format(_ date: Date) -> String {
        makeFormatter().string(from: date)
    }

    static func parse(_ text: String) -> Date? {
        makeFormatter().date(from: text.trimmingCharacters(in: .whitespaces))
    }

    private static func makeFormatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }
}

/// FNV-1a, 64 bits: a stable fingerprint of the served bytes for the ETag.
func fnv1a64(_ data: Data) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in data {
        hash ^= UInt64(byte)
        hash = hash &* 0x0000_0100_0000_01b3
    }
    return hash
}
