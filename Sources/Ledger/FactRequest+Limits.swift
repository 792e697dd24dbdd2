import Foundation

// The `Decider` checks every request against `InputLimits` before deciding:
// the parsers already did for what came as JSON, but requests built in code
// (App Store notifications, receipts, tests) meet the same limits this way.

extension FactRequest {
    /// Identifiers (in NFC), text, quantity, instants in the range, and
    /// effective dates at most `InputLimits.futureTolerance` after `now`;
    /// fields in the order the parser reads them.
    func checkLimits(now: Date) throws(LedgerError) {
        let check = LimitCheck(now: now, prefix: "")
        switch self {
        case .purchase(let purchase):
            try check.identifier(purchase.transactionID, "transactionId")
            try check.identifier(purchase.originalTransactionID, "originalTransactionId")
            try check.identifier(purchase.productID, "productId")
            try check.effectiveDate(purchase.purchaseDate, "purchaseDate")
            try check.instant(purchase.expiresDate, "expiresDate")
            try check.identifier(purchase.deviceID, "deviceId")
            try check.quantity(purchase.quantity)
        case .renewal(let renewal):
            try check.identifier(renewal.transactionID, "transactionId")
            try check.identifier(renewal.originalTransactionID, "originalTransactionId")
            try check.identifier(renewal.productID, "productId")
            try check.effectiveDate(renewal.purchaseDate, "purchaseDate")
            try check.instant(renewal.expiresDate, "expiresDate")
            try check.effectiveDate(renewal.effectiveDate, "effectiveDate")
            try check.identifier(renewal.deviceID, "deviceId")
            try check.quantity(renewal.quantity)
        case .restore(let restore):
            try check.transaction(restore.transaction)
            try check.identifier(restore.deviceID, "deviceId")
        case .refund(let refund):
            try check.identifier(refund.transactionID, "transactionId")
            try check.identifier(refund.originalTransactionID, "originalTransactionId")
            try check.effectiveDate(refund.revocationDate, "revocationDate")
            try check.text(refund.reason, "reason")
        case .refundReversal(let reversal):
            try check.identifier(reversal.transactionID, "transactionId")
            try check.identifier(reversal.originalTransactionID, "originalTransactionId")
            try check.effectiveDate(reversal.effectiveDate, "effectiveDate")
            try check.text(reversal.reason, "reason")
        case .expiry(let expiry):
            switch expiry.subject {
            case .subscription(let original, let end):
                try check.identifier(original, "originalTransactionId")
                try check.instant(end, "expiresDate")
            case .coverage(let productID, let end):
                try check.identifier(productID, "productId")
                try check.instant(end, "expiresDate")
            }
            try check.text(expiry.reason, "reason")
        case .autoRenewChange(let change):
            try check.identifier(change.originalTransactionID, "originalTransactionId")
            try check.identifier(change.productID, "productId")
            try check.effectiveDate(change.effectiveDate, "effectiveDate")
        case .billingIssue(let issue):
            try check.identifier(issue.originalTransactionID, "originalTransactionId")
            try check.identifier(issue.productID, "productId")
            try check.instant(issue.gracePeriodExpiresDate, "gracePeriodExpiresDate")
            try check.effectiveDate(issue.effectiveDate, "effectiveDate")
        case .googlePlayPurchase(let purchase):
            try InputLimits.checkPurchaseToken(purchase.purchaseToken, field: "purchaseToken")
            if let linked = purchase.linkedPurchaseToken { try InputLimits.checkPurchaseToken(linked, field: "linkedPurchaseToken") }
            try check.identifier(purchase.orderID, "orderId")
            try check.identifier(purchase.productID, "productId")
            try check.identifier(purchase.basePlanID, "basePlanId")
            try check.instant(purchase.startTime, "startTime")
            try check.instant(purchase.expiryTime, "expiryTime")
            try check.effectiveDate(purchase.observedAt, "eventTimeMillis")
            try check.quantity(purchase.quantity)
        case .googlePlayVoid(let void):
            try InputLimits.checkPurchaseToken(void.purchaseToken, field: "purchaseToken")
            try check.identifier(void.orderID, "orderId")
            try check.effectiveDate(void.voidedAt, "voidedTimeMillis")
        }
    }
}

extension RestoreRequest {
    /// As `FactRequest.checkLimits(now:)`, fields named `transactions[i].…`.
    func checkLimits(now: Date) throws(LedgerError) {
        guard transactions.count <= InputLimits.maximumRestoredTransactions else {
            throw .invalidField("transactions", expected: "at most 1000 transactions", got: "\(transactions.count)")
        }
        for (index, transaction) in transactions.enumerated() {
            try LimitCheck(now: now, prefix: "transactions[\(index)].").transaction(transaction)
        }
        try LimitCheck(now: now, prefix: "").identifier(deviceID, "deviceId")
    }
}

private struct LimitCheck {
    let now: Date
    let prefix: String

    func identifier(_ text: String?, _ key: String) throws(LedgerError) {
        if let text { try InputLimits.checkIdentifier(text, field: prefix + key) }
    }

    func text(_ text: String?, _ key: String) throws(LedgerError) {
        if let text { try InputLimits.checkFreeText(text, field: prefix + key) }
    }

    func instant(_ date: Date?, _ key: String) throws(LedgerError) {
        if let date { _ = try InputLimits.instant(date, field: prefix + key) }
    }

    func effectiveDate(_ date: Date?, _ key: String) throws(LedgerError) {
        if let date { try InputLimits.checkEffectiveDate(date, field: prefix + key, now: now) }
    }

    func quantity(_ quantity: Int) throws(LedgerError) {
        guard InputLimits.quantities.contains(quantity) else {
            throw .invalidField(prefix + "quantity", expected: "an integer from 1 to 1000000", got: "\(quantity)")
        }
    }

    func transaction(_ transaction: RestoreRequest.Transaction) throws(LedgerError) {
        try identifier(transaction.transactionID, "transactionId")
        try identifier(transaction.originalTransactionID, "originalTransactionId")
        try identifier(transaction.productID, "productId")
        try effectiveDate(transaction.purchaseDate, "purchaseDate")
        try instant(transaction.expiresDate, "expiresDate")
    }
}
