import Foundation

// The payloads of the events Subledger records about the subscriber rather
// than about a purchase: ownership moves, devices, reminder deliveries.

/// One side of moving an original transaction between subscribers (restore
/// under the `transfer` policy). Both sides carry the same identity, so the
/// pair is idempotent: `afterPosition` is the receiving subscriber's last
/// stream position when the transfer was decided (0 for an empty stream).
public struct TransferFact: Sendable, Hashable, Codable {
    public var originalTransactionID: String
    public var fromSubscriberID: String
    public var toSubscriberID: String
    public var afterPosition: Int64
    public var date: Date
    /// Receiving side: the transaction that was presented for the original.
    public var transaction: TransactionFact?
    public var source: String
    /// The environment whose original moved (ownership is per environment);
    /// absent in transfers recorded before it was kept: Production.
    public var environment: Environment?
    /// The store of the purchase that moved; absent: the App Store.
    public var store: Store?

    public init(originalTransactionID: String, fromSubscriberID: String, toSubscriberID: String, afterPosition: Int64,
                date: Date, transaction: TransactionFact? = nil, source: String = FactSource.api,
                environment: Environment? = nil, store: Store? = nil) {
        self.originalTransactionID = originalTransactionID
        self.fromSubscriberID = fromSubscriberID
        self.toSubscriberID = toSubscriberID
        self.afterPosition = afterPosition
        self.date = date
        self.transaction = transaction
        self.source = source
        self.environment = environment
        self.store = store
    }

    enum CodingKeys: String, CodingKey {
        case originalTransactionID = "originalTransactionId"
        case fromSubscriberID = "fromSubscriberId", toSubscriberID = "toSubscriberId"
        case afterPosition, date, transaction, source, environment, store
    }

    /// The ownership key of the original that moved.
    public var ownershipKey: String {
        (store ?? .appStore).ownershipKey(originalTransactionID, environment: environment ?? .production)
    }
}

/// A device the subscriber restored on (purchases name theirs in the fact).
public struct DeviceSeen: Sendable, Hashable, Codable {
    public var deviceID: String
    public var date: Date
    public var source: String

    public init(deviceID: String, date: Date, source: String = FactSource.api) {
        self.deviceID = deviceID
        self.date = date
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case deviceID = "deviceId", date, source
    }
}

/// A reminder webhook delivery attempt (appended by the dispatcher).
public struct ReminderDelivery: Sendable, Hashable, Codable {
    public var reminderID: String
    public var type: ReminderType
    public var group: String
    public var productID: String
    public var expiresAt: Date
    public var lead: ISODuration
    public var dueAt: Date
    /// When it was sent or failed.
    public var date: Date
    public var attempt: Int
    /// Failures: what went wrong (status code, timeout...).
    public var error: String?
    public var source: String

    public init(reminderID: String, type: ReminderType, group: String, productID: String, expiresAt: Date,
                lead: ISODuration, dueAt: Date, date: Date, attempt: Int = 1, error: String? = nil,
                source: String = FactSource.subledger) {
        self.reminderID = reminderID
        self.type = type
        self.group = group
        self.productID = productID
        self.expiresAt = expiresAt
        self.lead = lead
        self.dueAt = dueAt
        self.date = date
        self.attempt = attempt
        self.error = error
        self.source = source
    }

    enum CodingKeys: String, CodingKey {
        case reminderID = "reminderId", type, group, productID = "productId"
        case expiresAt, lead, dueAt, date, attempt, error, source
    }
}
