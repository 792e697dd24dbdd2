import Ledger

/// Where the first copy of a duplicate fact is, so a repeat answers with its position.
enum DuplicatePosition {
    static func of(_ request: FactRequest, in history: [RecordedLedgerEvent]) -> Int64 {
        let match: (LedgerEvent) -> Bool
        switch request.type {
        case .purchase, .renewal, .restore:
            match = { event in
                switch event {
                case .purchased, .renewed, .restored, .transferredIn: event.transactionID == request.transactionId
                default: false
                }
            }
            return history.first { match($0.event) }?.position ?? history.last?.position ?? 0
        case .refund:
            match = { $0.idempotencyKey == "refund:" + (request.transactionId ?? "") }
        case .refundReversal:
            match = { $0.idempotencyKey == "refund-reversed:" + (request.transactionId ?? "") }
        case .expiry:
            match = { event in
                guard case .expired(let expiry) = event else { return false }
                if let original = request.originalTransactionId { return expiry.originalTransactionId == original }
                return expiry.productId == request.productId
            }
        case .autoRenewChange:
            match = { if case .autoRenewChanged(let change) = $0 { change.originalTransactionId == request.originalTransactionId } else { false } }
        case .billingIssue:
            match = { if case .billingIssue(let issue) = $0 { issue.originalTransactionId == request.originalTransactionId } else { false } }
        default:
            match = { $0.transactionID != nil && $0.transactionID == request.transactionId }
        }
        return history.last { match($0.event) }?.position ?? history.last?.position ?? 0
    }
}
