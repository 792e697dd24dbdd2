import EventStore
import Foundation
import JSON
import Ledger
import Postgres

/// The projection's side of the read models (`sql/0007_read_models.sql`):
/// replacing the rows of many subscribers at once.
enum ReadModelRows {
    static let tables = ["subscriptions", "non_renewing_periods", "entitlements", "product_activity"]

    /// Replaces every row of the subscribers of `models` with theirs: one
    /// DELETE and one multi-row INSERT per table, sent together (libpq
    /// pipeline mode), so a batch costs one round trip however many
    /// subscribers it touches. `alongside` joins the same pipeline. Runs in
    /// the caller's transaction.
    static func replace(_ models: [SubscriberReadModel], alongside: [PostgresQuery] = [], into tables: ProjectionTables = .live,
                        on connection: Connection) async throws {
        guard !models.isEmpty else { return }
        _ = try await connection.pipeline(deletions(models, tables) + (try insertions(models, tables)) + alongside)
    }

    /// Adds the rows of `models` (a rebuild, into emptied tables): one COPY
    /// per table, in COPY's binary format, formatted straight into bytes,
    /// rather than as the JSON documents `replace` sends: a rebuild writes
    /// every row of the read models, and encoding them with `JSONEncoder` and
    /// parsing them back in `jsonb_to_recordset` cost more than folding the
    /// events; in COPY's text format, the server still spent a tenth of the
    /// load parsing dates. The values are the same: dates at the millisecond
    /// `LedgerJSON`'s encoder writes (`RFC3339.milliseconds`), NULL where the
    /// JSON has `null`.
    static func insert(_ models: [SubscriberReadModel], into tables: ProjectionTables = .live, on connection: Connection) async throws {
        for (table, rows) in copyRows(models) where !rows.isEmpty {
            try await connection.copy(unsafeSQL: "COPY \(tables.name(table)) (\(copyColumns[table]!)) FROM STDIN WITH (FORMAT binary)",
                                      rows: rows)
        }
    }

    /// The columns `copyRows` writes, in its order.
    static let copyColumns = [
        "subscriptions": """
            environment, subscriber_id, "group", series, product_id, type, original_transaction_id, latest_transaction_id, \
            starts_at, expires_at, grace_ends_at, revoked_at, auto_renew, entitlements, store, held_status
            """,
        "non_renewing_periods": """
            environment, subscriber_id, transaction_id, "group", product_id, original_transaction_id, starts_at, ends_at
            """,
        "entitlements": "environment, subscriber_id, entitlement, starts_at, ends_at, product_id, source_transaction_id",
        "product_activity": """
            environment, subscriber_id, product_id, starts_at, ends_at, type, "group", source_transaction_id
            """,
    ]

    /// Each table's rows for `models`, in COPY's binary format.
    static func copyRows(_ models: [SubscriberReadModel]) -> [(table: String, rows: CopyBinaryRows)] {
        var subscriptions = CopyBinaryRows(), periods = CopyBinaryRows(), entitlements = CopyBinaryRows(), products = CopyBinaryRows()
        func date(_ date: Date?, into rows: inout CopyBinaryRows) {
            if let date { rows.append(unixMilliseconds: RFC3339.milliseconds(of: date)) } else { rows.appendNull() }
        }
        for model in models {
            for row in model.subscriptions {
                subscriptions.beginRow(fields: 16)
                subscriptions.append(row.environment.rawValue)
                subscriptions.append(model.subscriberID)
                subscriptions.append(row.group)
                subscriptions.append(row.series)
                subscriptions.append(row.productID)
                subscriptions.append(row.type.rawValue)
                subscriptions.append(row.originalTransactionID)
                subscriptions.append(row.latestTransactionID)
                date(row.startsAt, into: &subscriptions)
                date(row.expiresAt, into: &subscriptions)
                date(row.graceEndsAt, into: &subscriptions)
                date(row.revokedAt, into: &subscriptions)
                subscriptions.append(row.autoRenew)
                subscriptions.append(array: row.entitlements)
                subscriptions.append(row.store.rawValue)
                if let held = row.heldStatus { subscriptions.append(held.rawValue) } else { subscriptions.appendNull() }
            }
            for row in model.periods {
                periods.beginRow(fields: 8)
                periods.append(row.environment.rawValue)
                periods.append(model.subscriberID)
                periods.append(row.transactionID)
                periods.append(row.group)
                periods.append(row.productID)
                periods.append(row.originalTransactionID)
                date(row.start, into: &periods)
                date(row.end, into: &periods)
            }
            for row in model.entitlements {
                entitlements.beginRow(fields: 7)
                entitlements.append(row.environment.rawValue)
                entitlements.append(model.subscriberID)
                entitlements.append(row.entitlement)
                date(row.start, into: &entitlements)
                date(row.end, into: &entitlements)
                entitlements.append(row.productID)
                entitlements.append(row.source)
            }
            for row in model.products {
                products.beginRow(fields: 8)
                products.append(row.environment.rawValue)
                products.append(model.subscriberID)
                products.append(row.productID)
                date(row.start, into: &products)
                date(row.end, into: &products)
                products.append(row.type.rawValue)
                products.append(row.group)
                products.append(row.source)
            }
        }
        return [("subscriptions", subscriptions), ("non_renewing_periods", periods), ("entitlements", entitlements),
                ("product_activity", products)]
    }

    private static func deletions(_ models: [SubscriberReadModel], _ target: ProjectionTables) -> [PostgresQuery] {
        let subscribers = JSONArgument.strings(models.map(\.subscriberID))
        let environments = JSONArgument.strings(Environment.allCases.map(\.rawValue))
        return tables.map { table -> PostgresQuery in
            """
            DELETE FROM \(unsafeRaw: target.name(table))
            WHERE environment IN (SELECT jsonb_array_elements_text(\(environments)::jsonb)::subledger_environment)
              AND subscriber_id IN (SELECT jsonb_array_elements_text(\(subscribers)::jsonb))
            """
        }
    }

    private static func insertions(_ models: [SubscriberReadModel], _ target: ProjectionTables) throws -> [PostgresQuery] {
        let encoder = LedgerJSON.makeEncoder()
        var statements: [PostgresQuery] = []
        let subscriptions = models.flatMap { model in model.subscriptions.map { SubscriptionRow(model.subscriberID, $0) } }
        if !subscriptions.isEmpty {
            statements.append("""
                INSERT INTO \(unsafeRaw: target.name("subscriptions")) (environment, subscriber_id, "group", series, product_id, type, original_transaction_id,
                                           latest_transaction_id, starts_at, expires_at, grace_ends_at, revoked_at, auto_renew,
                                           entitlements, store, held_status)
                SELECT x.environment, x.subscriber_id, x."group", x.series, x.product_id, x.type, x.original_transaction_id,
                       x.latest_transaction_id, x.starts_at, x.expires_at, x.grace_ends_at, x.revoked_at, x.auto_renew,
                       ARRAY(SELECT jsonb_array_elements_text(x.entitlements)), x.store, x.held_status
                FROM jsonb_to_recordset(\(PostgresJSON(data: try encoder.encode(subscriptions)))::jsonb) AS x(
                    environment subledger_environment, subscriber_id text, "group" text, series text, product_id text,
                    type subledger_product_type, original_transaction_id text, latest_transaction_id text, starts_at timestamptz,
                    expires_at timestamptz, grace_ends_at timestamptz, revoked_at timestamptz, auto_renew boolean,
                    entitlements jsonb, store subledger_store, held_status text)
                """)
        }
        let periods = models.flatMap { model in model.periods.map { PeriodRow(model.subscriberID, $0) } }
        if !periods.isEmpty {
            statements.append("""
                INSERT INTO \(unsafeRaw: target.name("non_renewing_periods")) (environment, subscriber_id, transaction_id, "group", product_id,
                                                  original_transaction_id, starts_at, ends_at)
                SELECT x.environment, x.subscriber_id, x.transaction_id, x."group", x.product_id, x.original_transaction_id,
                       x.starts_at, x.ends_at
                FROM jsonb_to_recordset(\(PostgresJSON(data: try encoder.encode(periods)))::jsonb) AS x(
                    environment subledger_environment, subscriber_id text, transaction_id text, "group" text, product_id text,
                    original_transaction_id text, starts_at timestamptz, ends_at timestamptz)
                """)
        }
        let entitlements = models.flatMap { model in model.entitlements.map { EntitlementRow(model.subscriberID, $0) } }
        if !entitlements.isEmpty {
            statements.append("""
                INSERT INTO \(unsafeRaw: target.name("entitlements")) (environment, subscriber_id, entitlement, starts_at, ends_at, product_id, source_transaction_id)
                SELECT x.environment, x.subscriber_id, x.entitlement, x.starts_at, x.ends_at, x.product_id, x.source_transaction_id
                FROM jsonb_to_recordset(\(PostgresJSON(data: try encoder.encode(entitlements)))::jsonb) AS x(
                    environment subledger_environment, subscriber_id text, entitlement text, starts_at timestamptz,
                    ends_at timestamptz, product_id text, source_transaction_id text)
                """)
        }
        let products = models.flatMap { model in model.products.map { ProductRow(model.subscriberID, $0) } }
        if !products.isEmpty {
            statements.append("""
                INSERT INTO \(unsafeRaw: target.name("product_activity")) (environment, subscriber_id, product_id, starts_at, ends_at, type, "group",
                                              source_transaction_id)
                SELECT x.environment, x.subscriber_id, x.product_id, x.starts_at, x.ends_at, x.type, x."group",
                       x.source_transaction_id
                FROM jsonb_to_recordset(\(PostgresJSON(data: try encoder.encode(products)))::jsonb) AS x(
                    environment subledger_environment, subscriber_id text, product_id text, starts_at timestamptz,
                    ends_at timestamptz, type subledger_product_type, "group" text, source_transaction_id text)
                """)
        }
        return statements
    }

    /// Empties every read-model table (a rebuild's first step, in its
    /// transaction: readers keep the old rows until it commits).
    static func deleteAll(on connection: Connection) async throws {
        _ = try await connection.pipeline(tables.map { table -> PostgresQuery in "DELETE FROM \(unsafeRaw: table)" })
    }

    // The rows as `jsonb_to_recordset` reads them (keys are the columns).

    struct SubscriptionRow: Encodable {
        var environment, subscriber_id, group, series, product_id, type, original_transaction_id, latest_transaction_id: String
        @ExplicitNull var starts_at: Date?
        @ExplicitNull var expires_at: Date?
        @ExplicitNull var grace_ends_at: Date?
        @ExplicitNull var revoked_at: Date?
        var auto_renew: Bool
        var entitlements: [String]
        var store: String
        @ExplicitNull var held_status: String?

        init(_ subscriberID: String, _ row: SubscriberReadModel.Subscription) {
            environment = row.environment.rawValue
            subscriber_id = subscriberID
            group = row.group
            series = row.series
            product_id = row.productID
            type = row.type.rawValue
            original_transaction_id = row.originalTransactionID
            latest_transaction_id = row.latestTransactionID
            starts_at = row.startsAt
            expires_at = row.expiresAt
            grace_ends_at = row.graceEndsAt
            revoked_at = row.revokedAt
            auto_renew = row.autoRenew
            entitlements = row.entitlements
            store = row.store.rawValue
            held_status = row.heldStatus?.rawValue
        }
    }

    struct PeriodRow: Encodable {
        var environment, subscriber_id, transaction_id, group, product_id, original_transaction_id: String
        var starts_at, ends_at: Date

        init(_ subscriberID: String, _ row: SubscriberReadModel.Period) {
            environment = row.environment.rawValue
            subscriber_id = subscriberID
            transaction_id = row.transactionID
            group = row.group
            product_id = row.productID
            original_transaction_id = row.originalTransactionID
            starts_at = row.start
            ends_at = row.end
        }
    }

    struct EntitlementRow: Encodable {
        var environment, subscriber_id, entitlement, product_id, source_transaction_id: String
        var starts_at: Date
        @ExplicitNull var ends_at: Date?

        init(_ subscriberID: String, _ row: SubscriberReadModel.EntitlementInterval) {
            environment = row.environment.rawValue
            subscriber_id = subscriberID
            entitlement = row.entitlement
            product_id = row.productID
            source_transaction_id = row.source
            starts_at = row.start
            ends_at = row.end
        }
    }

    struct ProductRow: Encodable {
        var environment, subscriber_id, product_id, type, group, source_transaction_id: String
        var starts_at: Date
        @ExplicitNull var ends_at: Date?

        init(_ subscriberID: String, _ row: SubscriberReadModel.ProductInterval) {
            environment = row.environment.rawValue
            subscriber_id = subscriberID
            product_id = row.productID
            type = row.type.rawValue
            group = row.group
            source_transaction_id = row.source
            starts_at = row.start
            ends_at = row.end
        }
    }
}

extension ReadModelRows {
    /// Erasure: the subscriber's rows stay, since statistics and listings
    /// count them, under the pseudonym instead of the id.
    static let erasureStep = ErasureStep(name: "read models") { subscriberID, pseudonym, connection in
        for table in tables {
            try await connection.query(
                "UPDATE \(unsafeRaw: table) SET subscriber_id = \(pseudonym) WHERE subscriber_id = \(subscriberID)")
        }
    }
}
