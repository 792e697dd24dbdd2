import Foundation

/// The decoded `signedPayload` of an App Store Server Notification V2
/// (Apple's `ResponseBodyV2DecodedPayload`). Dates are Apple's milliseconds
/// since 1970, decoded to `Date`.
public struct NotificationPayload: Sendable, Hashable, Codable {
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    public var notificationUUID: String
    public var signedDate: Date
    public var version: String?
    /// Present for the purchase and subscription types. Apple sends exactly
    /// one of `data`, `summary`, `appData` and `externalPurchaseToken`.
    public var data: NotificationData?
    /// `RENEWAL_EXTENSION` (mass extension) notifications carry this instead of `data`.
    public var summary: Summary?
    /// `RESCIND_CONSENT` notifications carry this instead of `data`.
    public var appData: AppData?
    /// `EXTERNAL_PURCHASE_TOKEN` notifications carry this instead of `data`.
    public var externalPurchaseToken: ExternalPurchaseToken?

    public init(notificationType: NotificationType, subtype: NotificationSubtype? = nil, notificationUUID: String,
                signedDate: Date, version: String? = "2.0", data: NotificationData? = nil, summary: Summary? = nil,
                appData: AppData? = nil, externalPurchaseToken: ExternalPurchaseToken? = nil) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.signedDate = signedDate
        self.version = version
        self.data = data
        self.summary = summary
        self.appData = appData
        self.externalPurchaseToken = externalPurchaseToken
    }

    /// The app and environment a `RENEWAL_EXTENSION` summary is about.
    public struct Summary: Sendable, Hashable, Codable {
        public var bundleID: String?
        public var environment: AppStoreEnvironment?
        public var appAppleID: Int64?
        public var productID: String?
        public var requestIdentifier: String?

        enum CodingKeys: String, CodingKey {
            case bundleID = "bundleId", environment, appAppleID = "appAppleId", productID = "productId", requestIdentifier
        }
    }

    /// The app a `RESCIND_CONSENT` notification is about
    /// (https://developer.apple.com/documentation/appstoreservernotifications/appdata).
    public struct AppData: Sendable, Hashable, Codable {
        public var bundleID: String?
        public var environment: AppStoreEnvironment?
        public var appAppleID: Int64?
        /// The customer's app transaction, a JWS of its own; kept as signed, not used.
        public var signedAppTransactionInfo: String?

        public init(bundleID: String?, environment: AppStoreEnvironment?, appAppleID: Int64? = nil,
                    signedAppTransactionInfo: String? = nil) {
            self.bundleID = bundleID
            self.environment = environment
            self.appAppleID = appAppleID
            self.signedAppTransactionInfo = signedAppTransactionInfo
        }

        enum CodingKeys: String, CodingKey {
            case bundleID = "bundleId", environment, appAppleID = "appAppleId", signedAppTransactionInfo
        }
    }

    /// The decoded external purchase token of an `EXTERNAL_PURCHASE_TOKEN`
    /// notification
    /// (https://developer.apple.com/documentation/appstoreservernotifications/externalpurchasetoken).
    /// It names no environment: a Sandbox token's id starts with `SANDBOX`.
    public struct ExternalPurchaseToken: Sendable, Hashable, Codable {
        public var externalPurchaseID: String?
        public var tokenCreationDate: Date?
        public var appAppleID: Int64?
        public var bundleID: String?

        public init(externalPurchaseID: String?, tokenCreationDate: Date? = nil, appAppleID: Int64? = nil, bundleID: String?) {
            self.externalPurchaseID = externalPurchaseID
            self.tokenCreationDate = tokenCreationDate
            self.appAppleID = appAppleID
            self.bundleID = bundleID
        }

        enum CodingKeys: String, CodingKey {
            case externalPurchaseID = "externalPurchaseId", tokenCreationDate, appAppleID = "appAppleId", bundleID = "bundleId"
        }

        /// Sandbox when the id says so, else Production (as Apple's server libraries decide).
        public var environment: AppStoreEnvironment {
            externalPurchaseID?.hasPrefix("SANDBOX") == true ? .sandbox : .production
        }
    }

    /// The app the notification is about, from whichever of the four shapes it has.
    public var bundleID: String? {
        data?.bundleID ?? summary?.bundleID ?? appData?.bundleID ?? externalPurchaseToken?.bundleID
    }

    /// The environment Apple signed it in, from whichever shape it has.
    public var environment: AppStoreEnvironment? {
        data?.environment ?? summary?.environment ?? appData?.environment ?? externalPurchaseToken?.environment
    }

    /// The app's Apple ID, from whichever shape it has.
    public var appAppleID: Int64? {
        data?.appAppleID ?? summary?.appAppleID ?? appData?.appAppleID ?? externalPurchaseToken?.appAppleID
    }
}

/// `data` of a notification: which app, which environment, and the nested
/// signed transaction and renewal info (each a JWS of its own).
public struct NotificationData: Sendable, Hashable, Codable {
    public var bundleID: String?
    public var bundleVersion: String?
    public var environment: AppStoreEnvironment?
    public var appAppleID: Int64?
    public var signedTransactionInfo: String?
    public var signedRenewalInfo: String?
    /// Subscription status (1 active, 2 expired, 3 billing retry, 4 grace, 5 revoked).
    public var status: Int?

    public init(bundleID: String?, bundleVersion: String? = nil, environment: AppStoreEnvironment?, appAppleID: Int64? = nil,
                signedTransactionInfo: String? = nil, signedRenewalInfo: String? = nil, status: Int? = nil) {
        self.bundleID = bundleID
        self.bundleVersion = bundleVersion
        self.environment = environment
        self.appAppleID = appAppleID
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
        self.status = status
    }

    enum CodingKeys: String, CodingKey {
        case bundleID = "bundleId", bundleVersion, environment, appAppleID = "appAppleId"
        case signedTransactionInfo, signedRenewalInfo, status
    }
}

/// Apple's `notificationType`. A string wrapper, not a closed enum, so a type
/// Apple adds later still decodes (and is acknowledged without facts).
public struct NotificationType: AppleStringValue {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let subscribed = NotificationType(rawValue: "SUBSCRIBED")
    public static let didRenew = NotificationType(rawValue: "DID_RENEW")
    public static let didChangeRenewalStatus = NotificationType(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    public static let didChangeRenewalPreference = NotificationType(rawValue: "DID_CHANGE_RENEWAL_PREF")
    public static let didFailToRenew = NotificationType(rawValue: "DID_FAIL_TO_RENEW")
    public static let gracePeriodExpired = NotificationType(rawValue: "GRACE_PERIOD_EXPIRED")
    public static let expired = NotificationType(rawValue: "EXPIRED")
    public static let refund = NotificationType(rawValue: "REFUND")
    public static let refundDeclined = NotificationType(rawValue: "REFUND_DECLINED")
    public static let refundReversed = NotificationType(rawValue: "REFUND_REVERSED")
    public static let revoke = NotificationType(rawValue: "REVOKE")
    public static let renewalExtended = NotificationType(rawValue: "RENEWAL_EXTENDED")
    public static let renewalExtension = NotificationType(rawValue: "RENEWAL_EXTENSION")
    public static let offerRedeemed = NotificationType(rawValue: "OFFER_REDEEMED")
    public static let priceIncrease = NotificationType(rawValue: "PRICE_INCREASE")
    public static let oneTimeCharge = NotificationType(rawValue: "ONE_TIME_CHARGE")
    public static let consumptionRequest = NotificationType(rawValue: "CONSUMPTION_REQUEST")
    public static let test = NotificationType(rawValue: "TEST")
    public static let externalPurchaseToken = NotificationType(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    public static let rescindConsent = NotificationType(rawValue: "RESCIND_CONSENT")
    public static let metadataUpdate = NotificationType(rawValue: "METADATA_UPDATE")
    public static let migration = NotificationType(rawValue: "MIGRATION")
    public static let priceChange = NotificationType(rawValue: "PRICE_CHANGE")
}

/// Apple's `subtype`, open for the same reason as `NotificationType`.
public struct NotificationSubtype: AppleStringValue {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let initialBuy = NotificationSubtype(rawValue: "INITIAL_BUY")
    public static let resubscribe = NotificationSubtype(rawValue: "RESUBSCRIBE")
    public static let upgrade = NotificationSubtype(rawValue: "UPGRADE")
    public static let downgrade = NotificationSubtype(rawValue: "DOWNGRADE")
    public static let autoRenewEnabled = NotificationSubtype(rawValue: "AUTO_RENEW_ENABLED")
    public static let autoRenewDisabled = NotificationSubtype(rawValue: "AUTO_RENEW_DISABLED")
    public static let voluntary = NotificationSubtype(rawValue: "VOLUNTARY")
    public static let billingRetry = NotificationSubtype(rawValue: "BILLING_RETRY")
    public static let priceIncrease = NotificationSubtype(rawValue: "PRICE_INCREASE")
    public static let productNotForSale = NotificationSubtype(rawValue: "PRODUCT_NOT_FOR_SALE")
    public static let gracePeriod = NotificationSubtype(rawValue: "GRACE_PERIOD")
    public static let billingRecovery = NotificationSubtype(rawValue: "BILLING_RECOVERY")
    public static let pending = NotificationSubtype(rawValue: "PENDING")
    public static let accepted = NotificationSubtype(rawValue: "ACCEPTED")
    public static let summary = NotificationSubtype(rawValue: "SUMMARY")
    public static let failure = NotificationSubtype(rawValue: "FAILURE")
    /// `EXTERNAL_PURCHASE_TOKEN`: a token not reported to Apple yet.
    public static let unreported = NotificationSubtype(rawValue: "UNREPORTED")
    public static let activeTokenReminder = NotificationSubtype(rawValue: "ACTIVE_TOKEN_REMINDER")
    public static let created = NotificationSubtype(rawValue: "CREATED")
}

/// Apple's `environment`: `Production`, `Sandbox`, or the local-testing ones.
public struct AppStoreEnvironment: AppleStringValue {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let production = AppStoreEnvironment(rawValue: "Production")
    public static let sandbox = AppStoreEnvironment(rawValue: "Sandbox")
    public static let xcode = AppStoreEnvironment(rawValue: "Xcode")
    public static let localTesting = AppStoreEnvironment(rawValue: "LocalTesting")
}

/// One of Apple's string enumerations, kept open: a value Apple adds later
/// still decodes. Coded as the bare string (the standard library's
/// `RawRepresentable` coding); described by it too.
public protocol AppleStringValue: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible
where RawValue == String {
    init(rawValue: String)
}

extension AppleStringValue {
    public var description: String { rawValue }
}
