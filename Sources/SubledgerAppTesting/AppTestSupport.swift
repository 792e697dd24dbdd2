import EventStore
import Foundation
import JSON
import Ledger
import Logging
import Postgres
import SubledgerApp
import TestSupport

public let exampleCatalogJSON = """
{ "version": 3,
  "products": [
    {"id": "com.example.pro.monthly", "type": "auto-renewable", "group": "pro", "entitlements": ["pro"], "reminders": ["P3D"]},
    {"id": "com.example.pass.30d", "type": "non-renewing", "duration": "P30D", "group": "pass", "entitlements": ["pro"], "reminders": ["P7D", "P1D", "P0D"]},
    {"id": "com.example.coins.100", "type": "consumable"},
    {"id": "com.example.level2", "type": "non-consumable", "entitlements": ["level2"]}
  ] }
"""

public enum Keys {
    public static let ingest = "ingest-key-1"
    public static let support = "support-key-1"
    public static let admin = "admin-key-1"
}

/// The catalog file's modification time the products tests see.
public let catalogModified = Date(timeIntervalSince1970: 1_700_000_000)

/// The application's dependencies on a fresh, migrated database.
/// `pool` changes how the pool connects (timeouts, conninfo) before it is made.
public func makeDependencies(restorePolicy: RestorePolicy = .transfer, poolSize: Int = 8,
                             pool configure: (inout PoolConfiguration) -> Void = { _ in }) async throws -> AppDependencies {
    var poolConfiguration = PoolConfiguration(conninfo: try await TestDatabase.make(), maximumConnections: poolSize)
    configure(&poolConfiguration)
    var configuration = SubledgerConfiguration()
    configuration.apiKeys = APIKeys([(.ingest, Keys.ingest), (.support, Keys.support), (.admin, Keys.admin)])
    configuration.restorePolicy = restorePolicy
    // The tests' webhook receivers listen on http://127.0.0.1.
    configuration.webhookAllowPrivate = true
    let logger = Logger(label: "server-tests")
    let pool = ConnectionPool(configuration: poolConfiguration, logger: logger)
    let data = Data(exampleCatalogJSON.utf8)
    let catalog = CatalogSource(catalog: try Catalog.decode(from: data), modified: catalogModified, raw: data)
    return AppDependencies(configuration: configuration, pool: pool, catalog: catalog, logger: logger)
}

extension JSONValue {
    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var int: Int64? { if case .integer(let value) = self { value } else { nil } }
    public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    public var array: [JSONValue] { if case .array(let value) = self { value } else { [] } }
    public var keys: Set<String> { if case .object(let fields) = self { Set(fields.keys) } else { [] } }
}

/// `date("2024-01-31T00:00:00Z")`.
public func date(_ text: String) -> Date {
    guard let date = RFC3339.parse(text) else { fatalError("bad test date \(text)") }
    return date
}

public func purchaseJSON(_ transactionID: String, product: String = "com.example.pass.30d", at purchaseDate: String = "2025-01-01T00:00:00Z",
                         original: String? = nil, device: String? = nil, expires: String? = nil, environment: String? = nil) -> String {
    var fields = [
        "\"type\": \"purchase\"", "\"transactionId\": \"\(transactionID)\"", "\"productId\": \"\(product)\"",
        "\"purchaseDate\": \"\(purchaseDate)\"",
    ]
    if let original { fields.append("\"originalTransactionId\": \"\(original)\"") }
    if let device { fields.append("\"deviceId\": \"\(device)\"") }
    if let expires { fields.append("\"expiresDate\": \"\(expires)\"") }
    if let environment { fields.append("\"environment\": \"\(environment)\"") }
    return "{" + fields.joined(separator: ", ") + "}"
}
