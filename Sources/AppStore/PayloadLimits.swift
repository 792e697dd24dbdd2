import Foundation
import Ledger

/// A signed payload checked against the input limits (docs/api.md, "Input limits") like any other
/// entry point: its dates in 1970…9999-12-31T23:59:59Z (kept to the
/// millisecond), its identifiers 1–200 bytes of UTF-8 without control
/// characters and normalised to NFC (`InputLimits`). A payload outside them
/// is refused with `invalid_field` naming the field inside the signed data
/// (`data.signedTransactionInfo.purchaseDate`), and nothing is stored.
protocol LimitedPayload {
    /// The payload within the limits (identifiers in NFC), fields named
    /// under `field`, the JWS they came in.
    func withinLimits(field: String) throws(AppStoreVerificationError) -> Self
}

/// Applies `InputLimits` to one payload's fields, naming them `field.key`.
private struct PayloadCheck {
    let field: String

    func identifier(_ text: String, _ key: String) throws(AppStoreVerificationError) -> String {
        do {
            return try InputLimits.identifier(text, field: field + "." + key)
        } catch {
            throw AppStoreVerificationError(.invalidField, error.message, field: field + "." + key)
        }
    }

    func identifier(_ text: String?, _ key: String) throws(AppStoreVerificationError) -> String? {
        guard let text else { return nil }
        return try identifier(text, key) as String
    }

    func instant(_ date: Date, _ key: String) throws(AppStoreVerificationError) -> Date {
        do {
            return try InputLimits.instant(date, field: field + "." + key)
        } catch {
            throw AppStoreVerificationError(.invalidField, error.message, field: field + "." + key)
        }
    }

    func instant(_ date: Date?, _ key: String) throws(AppStoreVerificationError) -> Date? {
        guard let date else { return nil }
        return try instant(date, key) as Date
    }
}

extension NotificationPayload: LimitedPayload {
    func withinLimits(field: String) throws(AppStoreVerificationError) -> NotificationPayload {
        let check = PayloadCheck(field: field)
        var payload = self
        // The UUID is the notification's idempotency key.
        payload.notificationUUID = try check.identifier(notificationUUID, "notificationUUID")
        payload.signedDate = try check.instant(signedDate, "signedDate")
        payload.summary?.productID = try check.identifier(summary?.productID, "summary.productId")
        payload.externalPurchaseToken?.externalPurchaseID = try check.identifier(externalPurchaseToken?.externalPurchaseID,
                                                                                 "externalPurchaseToken.externalPurchaseId")
        payload.externalPurchaseToken?.tokenCreationDate = try check.instant(externalPurchaseToken?.tokenCreationDate,
                                                                             "externalPurchaseToken.tokenCreationDate")
        return payload
    }
}

extension TransactionInfo: LimitedPayload {
    func withinLimits(field: String) throws(AppStoreVerificationError) -> TransactionInfo {
        let check = PayloadCheck(field: field)
        var transaction = self
        transaction.transactionID = try check.identifier(transactionID, "transactionId")
        transaction.originalTransactionID = try check.identifier(originalTransactionID, "originalTransactionId")
        transaction.webOrderLineItemID = try check.identifier(webOrderLineItemID, "webOrderLineItemId")
        transaction.productID = try check.identifier(productID, "productId")
        transaction.purchaseDate = try check.instant(purchaseDate, "purchaseDate")
        transaction.originalPurchaseDate = try check.instant(originalPurchaseDate, "originalPurchaseDate")
        transaction.expiresDate = try check.instant(expiresDate, "expiresDate")
        transaction.signedDate = try check.instant(signedDate, "signedDate")
        transaction.revocationDate = try check.instant(revocationDate, "revocationDate")
        return transaction
    }
}

extension RenewalInfo: LimitedPayload {
    func withinLimits(field: String) throws(AppStoreVerificationError) -> RenewalInfo {
        let check = PayloadCheck(field: field)
        var renewal = self
        renewal.originalTransactionID = try check.identifier(originalTransactionID, "originalTransactionId")
        renewal.productID = try check.identifier(productID, "productId")
        renewal.autoRenewProductID = try check.identifier(autoRenewProductID, "autoRenewProductId")
        renewal.gracePeriodExpiresDate = try check.instant(gracePeriodExpiresDate, "gracePeriodExpiresDate")
        renewal.renewalDate = try check.instant(renewalDate, "renewalDate")
        renewal.recentSubscriptionStartDate = try check.instant(recentSubscriptionStartDate, "recentSubscriptionStartDate")
        renewal.signedDate = try check.instant(signedDate, "signedDate")
        return renewal
    }
}
