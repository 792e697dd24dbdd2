import EventStore
import Foundation
import Hummingbird
import HummingbirdTesting
import JSON
import Ledger
import Logging
import Postgres
import HTTPAPI
import SubledgerApp
import SubledgerAppTesting
import TestSupport
import Testing

extension Keys {
    static func bearer(_ key: String) -> HTTPFields { [.authorization: "Bearer \(key)"] }
}

/// Runs `body` against the router on a fresh database, closing the pool after.
func withApp(restorePolicy: RestorePolicy = .transfer,
             _ body: @escaping @Sendable (any TestClientProtocol, AppDependencies) async throws -> Void) async throws {
    try await withApp(try await makeDependencies(restorePolicy: restorePolicy), body)
}

/// Runs `body` against the router built from `dependencies`, closing their pool after.
func withApp(_ dependencies: AppDependencies,
             _ body: @escaping @Sendable (any TestClientProtocol, AppDependencies) async throws -> Void) async throws {
    let app = buildApplication(dependencies)
    do {
        try await app.test(.router) { client in try await body(client, dependencies) }
        await dependencies.pool.close()
    } catch {
        await dependencies.pool.close()
        throw error
    }
}

extension TestClientProtocol {
    /// POSTs a JSON body with a key.
    func post(_ uri: String, _ json: String, key: String? = Keys.ingest) async throws -> TestResponse {
        var headers: HTTPFields = key.map(Keys.bearer) ?? [:]
        headers[.contentType] = "application/json"
        return try await execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: json))
    }

    func get(_ uri: String, key: String? = Keys.ingest, headers extra: HTTPFields = [:]) async throws -> TestResponse {
        var headers: HTTPFields = key.map(Keys.bearer) ?? [:]
        headers.append(contentsOf: extra)
        return try await execute(uri: uri, method: .get, headers: headers)
    }
}

extension TestResponse {
    var json: JSONValue {
        (try? JSONDecoder().decode(JSONValue.self, from: Data(body.readableBytesView))) ?? .null
    }

    var text: String { String(decoding: body.readableBytesView, as: UTF8.self) }

    /// The contract's error body: `(code, field)`.
    var error: (code: String?, field: String?) {
        (json["error"]?["code"]?.string, json["error"]?["field"]?.string)
    }
}

