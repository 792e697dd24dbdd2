// Apple's sample payloads, as Apple's App Store Server Library tests ship them
// (github.com/apple/app-store-server-library-python, tests/resources/models/):
// one of every notification shape Apple documents, and the signed data nested
// in them. Facts about Apple's formats, kept verbatim; tests make them ours
// (bundle id, nested signatures) with `AppleSamples.notification`.
import Foundation

public enum AppleSamples {
    /// The notification samples by file name, each with the shape it shows.
    public static let notifications: [(name: String, json: String)] = [
        ("signedNotification", signedNotification),
        ("signedConsumptionRequestNotification", signedConsumptionRequestNotification),
        ("signedSummaryNotification", signedSummaryNotification),
        ("signedRescindConsentNotification", signedRescindConsentNotification),
        ("signedExternalPurchaseTokenNotification", signedExternalPurchaseTokenNotification),
        ("signedExternalPurchaseTokenSandboxNotification", signedExternalPurchaseTokenSandboxNotification),
    ]

    /// SUBSCRIBED/INITIAL_BUY with `data` (https://developer.apple.com/documentation/appstoreservernotifications/data).
    public static let signedNotification = """
{
  "notificationType": "SUBSCRIBED",
  "subtype": "INITIAL_BUY",
  "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
  "data": {
    "environment": "LocalTesting",
    "appAppleId": 41234,
    "bundleId": "com.example",
    "bundleVersion": "1.2.3",
    "signedTransactionInfo": "signed_transaction_info_value",
    "signedRenewalInfo": "signed_renewal_info_value",
    "status": 1
  },
  "version": "2.0",
  "signedDate": 1698148900000
}
"""

    /// CONSUMPTION_REQUEST with `data` and a field of its own (https://developer.apple.com/documentation/appstoreservernotifications/consumptionrequestreason).
    public static let signedConsumptionRequestNotification = """
{
    "notificationType": "CONSUMPTION_REQUEST",
    "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
    "data": {
      "environment": "LocalTesting",
      "appAppleId": 41234,
      "bundleId": "com.example",
      "bundleVersion": "1.2.3",
      "signedTransactionInfo": "signed_transaction_info_value",
      "signedRenewalInfo": "signed_renewal_info_value",
      "status": 1,
      "consumptionRequestReason": "UNINTENDED_PURCHASE"
    },
    "version": "2.0",
    "signedDate": 1698148900000
}
"""

    /// RENEWAL_EXTENSION/SUMMARY with `summary` (https://developer.apple.com/documentation/appstoreservernotifications/summary).
    public static let signedSummaryNotification = """
{
  "notificationType": "RENEWAL_EXTENSION",
  "subtype": "SUMMARY",
  "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
  "version": "2.0",
  "signedDate": 1698148900000,
  "summary": {
    "environment": "LocalTesting",
    "appAppleId": 41234,
    "bundleId": "com.example",
    "productId": "com.example.product",
    "requestIdentifier": "efb27071-45a4-4aca-9854-2a1e9146f265",
    "storefrontCountryCodes": [
      "CAN",
      "USA",
      "MEX"
    ],
    "succeededCount": 5,
    "failedCount": 2
  }
}
"""

    /// RESCIND_CONSENT with `appData` (https://developer.apple.com/documentation/appstoreservernotifications/appdata).
    public static let signedRescindConsentNotification = """
{
  "notificationType": "RESCIND_CONSENT",
  "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
  "appData": {
    "appAppleId": 41234,
    "bundleId": "com.example",
    "environment": "LocalTesting",
    "signedAppTransactionInfo": "signed_app_transaction_info_value"
  },
  "version": "2.0",
  "signedDate": 1698148900000
}
"""

    /// EXTERNAL_PURCHASE_TOKEN/UNREPORTED, a Production token (https://developer.apple.com/documentation/appstoreservernotifications/externalpurchasetoken).
    public static let signedExternalPurchaseTokenNotification = """
{
    "notificationType": "EXTERNAL_PURCHASE_TOKEN",
    "subtype": "UNREPORTED",
    "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
    "version": "2.0",
    "signedDate": 1698148900000,
    "externalPurchaseToken": {
      "externalPurchaseId": "b2158121-7af9-49d4-9561-1f588205523e",
      "tokenCreationDate": 1698148950000,
      "appAppleId": 55555,
      "bundleId": "com.example"
    }
  }
"""

    /// EXTERNAL_PURCHASE_TOKEN/UNREPORTED, a Sandbox token (its id starts with SANDBOX) (https://developer.apple.com/documentation/appstoreservernotifications/externalpurchaseid).
    public static let signedExternalPurchaseTokenSandboxNotification = """
{
    "notificationType": "EXTERNAL_PURCHASE_TOKEN",
    "subtype": "UNREPORTED",
    "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20",
    "version": "2.0",
    "signedDate": 1698148900000,
    "externalPurchaseToken": {
      "externalPurchaseId": "SANDBOX_b2158121-7af9-49d4-9561-1f588205523e",
      "tokenCreationDate": 1698148950000,
      "appAppleId": 55555,
      "bundleId": "com.example"
    }
  }
"""

    /// a transaction, with fields this ledger does not read (https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload).
    public static let signedTransaction = """
{
  "transactionId":"23456",
  "originalTransactionId":"12345",
  "webOrderLineItemId":"34343",
  "bundleId":"com.example",
  "productId":"com.example.product",
  "subscriptionGroupIdentifier":"55555",
  "purchaseDate":1698148900000,
  "originalPurchaseDate":1698148800000,
  "expiresDate":1698149000000,
  "quantity":1,
  "type":"Auto-Renewable Subscription",
  "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
  "inAppOwnershipType":"PURCHASED",
  "signedDate":1698148900000,
  "revocationReason": 1,
  "revocationDate": 1698148950000,
  "isUpgraded": true,
  "offerType":1,
  "offerIdentifier": "abc.123",
  "environment":"LocalTesting",
  "transactionReason":"PURCHASE",
  "storefront":"USA",
  "storefrontId":"143441",
  "price": 10990,
  "currency": "USD",
  "offerDiscountType": "PAY_AS_YOU_GO",
  "appTransactionId": "71134",
  "offerPeriod": "P1Y",
  "advancedCommerceInfo": {
    "descriptors": {
      "description": "Premium Plan",
      "displayName": "Premium"
    },
    "estimatedTax": 1500,
    "items": [
      {
        "SKU": "com.example.sku.premium",
        "description": "Premium feature",
        "displayName": "Premium Feature",
        "price": 9990,
        "refunds": [
          {
            "refundAmount": 5000,
            "refundDate": 1698149100000,
            "refundReason": "FULFILLMENT_ISSUE",
            "refundType": "PRORATED"
          }
        ],
        "revocationDate": 1698149200000
      }
    ],
    "period": "P1M",
    "requestReferenceId": "ref-12345",
    "taxCode": "TAX_CODE_1",
    "taxExclusivePrice": 8490,
    "taxRate": "0.15"
  },
  "billingPlanType": "MONTHLY",
  "commitmentInfo": {
    "billingPeriodNumber": 3,
    "commitmentExpiresDate": 1698150000000,
    "commitmentPrice": 119880,
    "totalBillingPeriods": 12
  }
}
"""

    /// a partly refunded transaction (https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload).
    public static let signedTransactionWithRevocation = """
{
  "originalTransactionId": "12345",
  "transactionId": "23456",
  "webOrderLineItemId": "34343",
  "bundleId": "com.example",
  "productId": "com.example.product",
  "subscriptionGroupIdentifier": "55555",
  "purchaseDate": 1698148900000,
  "originalPurchaseDate": 1698148800000,
  "expiresDate": 1698149000000,
  "quantity": 1,
  "type": "Auto-Renewable Subscription",
  "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
  "inAppOwnershipType": "PURCHASED",
  "signedDate": 1698148900000,
  "revocationReason": 1,
  "revocationDate": 1698148950000,
  "isUpgraded": true,
  "offerType": 1,
  "offerIdentifier": "abc.123",
  "environment": "LocalTesting",
  "storefront": "USA",
  "storefrontId": "143441",
  "transactionReason": "PURCHASE",
  "price": 10990,
  "currency": "USD",
  "offerDiscountType": "PAY_AS_YOU_GO",
  "appTransactionId": "71134",
  "offerPeriod": "P1Y",
  "revocationType": "REFUND_PRORATED",
  "revocationPercentage": 50000
}
"""

    /// renewal info, with fields this ledger does not read (https://developer.apple.com/documentation/appstoreserverapi/jwsrenewalinfodecodedpayload).
    public static let signedRenewalInfo = """
{
  "expirationIntent": 1,
  "originalTransactionId": "12345",
  "autoRenewProductId": "com.example.product.2",
  "productId": "com.example.product",
  "autoRenewStatus": 1,
  "isInBillingRetryPeriod": true,
  "priceIncreaseStatus": 0,
  "gracePeriodExpiresDate": 1698148900000,
  "offerType": 2,
  "offerIdentifier": "abc.123",
  "signedDate": 1698148800000,
  "environment": "LocalTesting",
  "recentSubscriptionStartDate": 1698148800000,
  "renewalDate": 1698148850000,
  "renewalPrice": 9990,
  "currency": "USD",
  "offerDiscountType": "PAY_AS_YOU_GO",
  "eligibleWinBackOfferIds": [
    "eligible1",
    "eligible2"
  ],
  "appTransactionId": "71134",
  "offerPeriod": "P1Y",
  "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
  "advancedCommerceInfo": {
    "consistencyToken": "token-abc-123",
    "descriptors": {
      "description": "Premium Plan",
      "displayName": "Premium"
    },
    "items": [
      {
        "SKU": "com.example.sku.premium",
        "description": "Premium feature",
        "displayName": "Premium Feature",
        "price": 9990,
        "priceIncreaseInfo": {
          "dependentSKUs": [
            "com.example.sku.1",
            "com.example.sku.2"
          ],
          "price": 12990,
          "status": "PENDING"
        }
      }
    ],
    "period": "P1M",
    "requestReferenceId": "ref-12345",
    "taxCode": "TAX_CODE_1"
  },
  "commitmentInfo": {
    "commitmentAutoRenewProductId": "com.example.product.commitment",
    "commitmentAutoRenewStatus": 1,
    "commitmentRenewalBillingPlanType": "MONTHLY",
    "commitmentRenewalDate": 1698149500000,
    "commitmentRenewalPrice": 9990
  },
  "renewalBillingPlanType": "MONTHLY"
}
"""

    /// the app transaction `appData.signedAppTransactionInfo` carries (https://developer.apple.com/documentation/storekit/apptransaction).
    public static let appTransaction = """
{
  "receiptType": "LocalTesting",
  "appAppleId": 531412,
  "bundleId": "com.example",
  "applicationVersion": "1.2.3",
  "versionExternalIdentifier": 512,
  "receiptCreationDate": 1698148900000,
  "originalPurchaseDate": 1698148800000,
  "originalApplicationVersion": "1.1.2",
  "deviceVerification": "device_verification_value",
  "deviceVerificationNonce": "48ccfa42-7431-4f22-9908-7e88983e105a",
  "preorderDate": 1698148700000,
  "appTransactionId": "71134",
  "originalPlatform": "iOS"
}
"""
}

extension TestAppStore {
    /// One of Apple's sample notifications as Apple would send it to the app
    /// `bundleID`: that bundle id in whichever shape the sample has, its
    /// nested transaction, renewal info and app transaction replaced by
    /// Apple's samples of them signed with this chain, and `uuid` as its id.
    public func signedSample(_ json: String, bundleID: String = TestAppStore.bundleID, uuid: String) throws -> String {
        var payload = try Self.object(json)
        payload["notificationUUID"] = uuid
        for shape in ["data", "summary", "appData", "externalPurchaseToken"] {
            guard var part = payload[shape] as? [String: Any] else { continue }
            part["bundleId"] = bundleID
            if part["signedTransactionInfo"] != nil {
                part["signedTransactionInfo"] = try signedSample(AppleSamples.signedTransaction, bundleID: bundleID)
            }
            if part["signedRenewalInfo"] != nil {
                part["signedRenewalInfo"] = try signedSample(AppleSamples.signedRenewalInfo, bundleID: nil)
            }
            if part["signedAppTransactionInfo"] != nil {
                part["signedAppTransactionInfo"] = try signedSample(AppleSamples.appTransaction, bundleID: bundleID)
            }
            payload[shape] = part
        }
        return try sign(payload: JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]))
    }

    /// A sample of signed data (transaction, renewal info, app transaction)
    /// signed with this chain; `bundleID`, when given, replaces Apple's.
    public func signedSample(_ json: String, bundleID: String?) throws -> String {
        var payload = try Self.object(json)
        if let bundleID { payload["bundleId"] = bundleID }
        return try sign(payload: JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]))
    }

    private static func object(_ json: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            throw CocoaError(.coderReadCorrupt)
        }
        return object
    }
}
