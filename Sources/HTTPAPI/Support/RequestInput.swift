import Foundation
import Hummingbird
import Ledger
import SubledgerApp

/// Reading what a request carries: path parameters, the body, query instants.
enum RequestInput {
    /// The path's subscriber id, percent-decoded and validated.
    static func subscriberID(_ context: AppRequestContext) throws(LedgerError) -> String {
        // Most ids hold no escape: Foundation's decoding (1.5% of a read) only for those that do.
        guard let raw = context.parameters.get("subscriberId"),
              let decoded = raw.utf8.contains(UInt8(ascii: "%")) ? raw.removingPercentEncoding : raw else {
            throw LedgerError(kind: .badRequest, code: .invalidField,
                              message: "Field 'subscriberId' must be a percent-encoded path segment.", field: "subscriberId")
        }
        return try InputLimits.validateSubscriberID(decoded)
    }

    /// The request body, at most the configured limit (413 beyond it).
    static func body(_ request: Request, _ context: AppRequestContext) async throws -> Data {
        var data = Data()
        for try await chunk in request.body {
            guard data.count + chunk.readableBytes <= context.maxUploadSize else {
                throw APIError.bodyTooLarge(limit: context.maxUploadSize)
            }
            data.append(contentsOf: chunk.readableBytesView)
        }
        return data
    }

    /// `?environment=Production|Sandbox`; absent: Production.
    static func environment(in request: Request) throws(LedgerError) -> Ledger.Environment {
        guard let text = request.uri.queryParameters.get("environment") else { return .production }
        guard let environment = Ledger.Environment(rawValue: text) else {
            throw LedgerError(kind: .badRequest, code: .invalidField,
                              message: "Field 'environment' must be \"Production\" or \"Sandbox\", got \"\(text.prefix(64))\".",
                              field: "environment")
        }
        return environment
    }

    /// An RFC 3339 instant from the query; absent: nil.
    static func instant(_ name: String, in request: Request) throws(LedgerError) -> Date? {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        return try InputLimits.instant(parsing: text, field: name)
    }

    /// An identifier from the query (entitlement, group, product id): 1–200
    /// bytes without control characters; absent: nil.
    static func identifier(_ name: String, in request: Request) throws(LedgerError) -> String? {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        return try InputLimits.identifier(text, field: name)
    }

    /// `limit` from the query: a whole number in `range`; absent: `defaultValue`.
    static func limit(in request: Request, default defaultValue: Int, range: ClosedRange<Int>) throws(LedgerError) -> Int {
        guard let text = request.uri.queryParameters.get("limit") else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            throw LedgerError(kind: .badRequest, code: .invalidField,
                              message: "Field 'limit' must be a whole number from \(range.lowerBound) to \(range.upperBound), got \"\(text.prefix(64))\".",
                              field: "limit")
        }
        return value
    }

    /// A query value that must be one of a type's raw values; absent: nil.
    static func choice<Value: RawRepresentable & CaseIterable>(_ name: String, in request: Request, as _: Value.Type = Value.self)
        throws(LedgerError) -> Value? where Value.RawValue == String
    {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        guard let value = Value(rawValue: text) else {
            let allowed = Value.allCases.map(\.rawValue).joined(separator: ", ")
            throw LedgerError(kind: .badRequest, code: .invalidField,
                              message: "Field '\(name)' must be one of \(allowed), got \"\(text.prefix(64))\".", field: name)
        }
        return value
    }

    /// A subscriber id from the query, validated like the path's; absent: nil.
    static func subscriberID(query name: String = "subscriberId", in request: Request) throws(LedgerError) -> String? {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        return try InputLimits.validateSubscriberID(text, field: name)
    }
}
