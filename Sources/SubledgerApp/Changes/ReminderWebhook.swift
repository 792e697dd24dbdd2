import Foundation
import Ledger
import Postgres

/// The reminder webhook of `SUBLEDGER_WEBHOOK_URL`: a stored webhook endpoint
/// (`whk_reminders`) subscribed to the two reminder change types, so that
/// reminders are delivered by the change dispatcher with the same claim,
/// lease, order and backoff as every other change.
///
/// What its receivers were promised stays: the body carries the reminder's
/// fields at the top level (`id` is the reminder's id), the signature is
/// made with `SUBLEDGER_WEBHOOK_SECRET` (none without it), and after
/// `maximumAttempts` failed attempts the reminder is `failed`. A delivery's
/// outcome is also written to the reminder's row and, when final, recorded
/// as its `reminder_sent` / `reminder_failed` event in the same transaction.
public struct ReminderWebhook: Sendable, Equatable {
    public static let endpointID = "whk_reminders"
    public static let types = ReminderType.allCases.map(\.rawValue)

    public var url: String
    public var secret: String?
    /// Attempts before the reminder is `failed`.
    public var maximumAttempts: Int
    /// What seals the secret where it is stored (`WebhookSecretSealing`).
    public var sealingSecret: Data?

    public init(url: String, secret: String?, maximumAttempts: Int = 10, sealingSecret: Data? = nil) {
        self.url = url
        self.secret = secret
        self.maximumAttempts = maximumAttempts
        self.sealingSecret = sealingSecret
    }

    /// The configured one; nil without `SUBLEDGER_WEBHOOK_URL`.
    public init?(_ configuration: SubledgerConfiguration) {
        guard let url = configuration.webhookURL else { return nil }
        self.init(url: url, secret: configuration.webhookSecret,
                  sealingSecret: configuration.secret.derivedKeyBytes(for: .webhookSecretSealing))
    }

    /// Writes the endpoint as configured, or removes it (with its
    /// deliveries) when there is none: reminders are then published to the
    /// feed and sent nowhere. Called before the first sweep publishes any.
    public static func register(_ webhook: ReminderWebhook?, pool: ConnectionPool) async throws {
        guard let webhook else {
            try await WebhookStore.delete(endpointID, pool: pool)
            return
        }
        var sealed: String?
        if let secret = webhook.secret {
            sealed = try await WebhookSecretSealing.load(secret: webhook.sealingSecret, pool: pool).seal(secret)
        }
        try await WebhookStore.saveReminderEndpoint(id: endpointID, url: webhook.url, sealedSecret: sealed, types: types,
                                                    maximumAttempts: webhook.maximumAttempts, pool: pool)
    }
}
