import Foundation
import JSON

// Google Play's purchases under the ledger's rules. A Play fact is a state
// Google reported when the service fetched the purchase, so the rules read
// the fetched states of each purchase token rather than a chain of
// transactions:
// - at an instant T, the latest state observed at or before T decides when
//   it grants nothing (on hold, paused, pending, expired: from its
//   `observedAt`, or its `expiryTime` if earlier);
// - otherwise T is covered when a state observed at or before T, or one
//   observed later whose start is not after T, says the purchase was paid
//   until after T (a missed renewal push is filled in by the next fetch);
// - a purchase with `linkedPurchaseToken` replaces the linked one, which
//   grants nothing from the new purchase's start whatever Google still says
//   of it; a voided purchase grants nothing from `voidedTimeMillis`.
// Repeated, missed and reordered pushes therefore converge on what the
// fetched states say, whatever order they were recorded in.
// https://developer.android.com/google/play/billing/lifecycle/subscriptions
// https://developers.google.com/android-publisher/api-ref/rest/v3/purchases.subscriptionsv2

extension GooglePlayPurchase.State {
    /// The status of a subscription in this state once it is in effect.
    var heldStatus: SubscriptionStatus? {
        switch self {
        case .onHold: .onHold
        case .paused: .paused
        case .pending, .pendingPurchaseCanceled, .productPending: .pending
        case .expired, .unspecified, .productCanceled: .expired
        case .active, .inGracePeriod, .canceled, .purchased: nil
        }
    }

    /// Whether this state says the purchase was ever paid for (pending
    /// purchases never were).
    var wasPaid: Bool {
        switch self {
        case .pending, .pendingPurchaseCanceled, .productPending: false
        default: true
        }
    }
}

/// One Play purchase token judged at an instant.
struct PlayEvaluation {
    var latest: GooglePlayPurchase
    var product: Product
    var status: SubscriptionStatus
    /// When access ends (or ended) as the fetched states say.
    var end: Date
    var graceEnd: Date?
    var autoRenew: Bool
    var revokedAt: Date?
    var reason: String
    var positions: [Int64]
}

extension Evaluation {
    /// The catalog product a Play purchase is listed under: `productId:basePlanId`, else `productId`.
    static func playProduct(_ purchase: GooglePlayPurchase, catalog: Catalog) -> Product? {
        for id in purchase.catalogIDs {
            if let product = catalog.product(id: id, store: .googlePlay) { return product }
        }
        return nil
    }

    /// `token` at `at`: nil when no state of it is visible yet, it is held
    /// by someone else, or its product is not in the catalog.
    static func playEvaluation(_ token: String, ledger: SubscriberLedger, catalog: Catalog, at: Date,
                               environment: Environment?) -> PlayEvaluation? {
        guard let states = ledger.playPurchases[token] else { return nil }
        let ordered = states.filter { environment == nil || $0.value.environment == environment }
            .sorted { ($0.date, $0.position) < ($1.date, $1.position) }
        // A state is visible from the purchase's start or from when it was
        // observed, whichever is earlier.
        let visible = ordered.filter { min($0.value.startTime, $0.date) <= at }
        guard let newest = visible.last else { return nil }
        let key = Store.googlePlay.ownershipKey(token, environment: newest.value.environment)
        guard ledger.owns(key: key, at: at), let product = playProduct(newest.value, catalog: catalog) else { return nil }
        let before = visible.last { $0.date <= at }
        let latest = (before ?? newest).value
        var positions = visible.map(\.position)
        let name = "Google Play \(latest.kind.rawValue) \(product.id) (token \(token)\(latest.orderID.map { ", order \($0)" } ?? ""))"
        var evaluation = PlayEvaluation(latest: latest, product: product, status: .expired, end: latest.expiryTime ?? latest.startTime,
                                        graceEnd: nil, autoRenew: latest.autoRenew ?? false, revokedAt: nil, reason: "",
                                        positions: positions)
        if let void = ledger.playVoids[token], void.date <= at {
            positions.append(void.position)
            evaluation.status = .revoked
            evaluation.end = void.date
            evaluation.revokedAt = void.date
            evaluation.positions = positions
            evaluation.reason = "\(name) was voided by Google Play at \(RFC3339.format(void.date))"
                + (void.value.reason.map { " (reason: \(GooglePlayVoid.reasonName($0)))" } ?? "") + "; access ended then"
            return evaluation
        }
        if let replacement = ledger.playReplacement(of: token, at: at), replacement.date <= at {
            positions.append(replacement.position)
            evaluation.status = .expired
            evaluation.end = min(evaluation.end, replacement.date)
            evaluation.positions = positions
            evaluation.reason = "\(name) was replaced by token \(replacement.by) from \(RFC3339.format(replacement.date)); it grants nothing since"
            return evaluation
        }
        if product.type != .autoRenewable {
            // A one-time product: owned while purchaseState is 0.
            evaluation.end = latest.startTime
            if latest.state == .productCanceled {
                evaluation.status = .revoked
                evaluation.revokedAt = min(latest.observedAt, before?.date ?? latest.observedAt)
                evaluation.reason = "\(name) was canceled as Google Play said at \(RFC3339.format(latest.observedAt))"
            } else if latest.state == .purchased {
                evaluation.status = .active
                evaluation.reason = "\(name) was bought at \(RFC3339.format(latest.startTime)) and is owned (purchaseState 0)"
            } else {
                evaluation.status = latest.state.heldStatus ?? .expired
                evaluation.reason = "\(name) is \(latest.state.rawValue) as Google Play said at \(RFC3339.format(latest.observedAt))"
            }
            return evaluation
        }
        if let before, let held = before.value.state.heldStatus {
            let state = before.value
            let from = min(before.date, state.expiryTime ?? before.date)
            evaluation.status = held
            evaluation.end = state.state.wasPaid ? from : state.startTime
            evaluation.reason = "\(name) is \(state.state.rawValue) as Google Play said at \(RFC3339.format(before.date))"
                + (state.state.wasPaid ? "; access ended at \(RFC3339.format(from))" : "; it was never paid for")
            return evaluation
        }
        // Covered until the latest paid end that a state observed by now, or
        // a later one that had started by now, gives.
        // The latest state observed by T speaks for T (older ones are
        // superseded, even with a later end). States observed after T fill
        // in only past its end (a renewal whose push was missed), and only
        // until the first of them that grants nothing: a hold or a pause
        // seen later was an interruption the subscription's `startTime` (of
        // the whole subscription, not of the period) does not tell.
        var cover: (end: Date, state: GooglePlayPurchase)?
        if let before, before.value.state.wasPaid, let expiry = before.value.expiryTime {
            cover = (expiry, before.value)
        }
        for dated in visible where dated.date > at {
            let state = dated.value
            if state.state.heldStatus != nil { break }
            guard state.state.wasPaid, state.startTime <= at, let expiry = state.expiryTime else { continue }
            if cover.map({ expiry > $0.end }) ?? true { cover = (expiry, state) }
        }
        guard let (end, state) = cover else {
            evaluation.reason = "\(name) has no paid period as Google Play says"
            return evaluation
        }
        evaluation.end = end
        evaluation.autoRenew = state.autoRenew ?? false
        if at < end {
            evaluation.status = state.state == .inGracePeriod ? .grace : .active
            if state.state == .inGracePeriod { evaluation.graceEnd = end }
            evaluation.reason = "\(name) is paid until \(RFC3339.format(end))"
                + (state.state == .inGracePeriod ? " in its billing grace period" : "")
                + (evaluation.autoRenew ? " and renews" : "; auto-renew is off, so access ends then")
        } else {
            evaluation.reason = "\(name) expired at \(RFC3339.format(end))"
        }
        return evaluation
    }

    /// Google Play's purchases: one-time products join `transactions`
    /// (before they are sorted); the subscriptions are returned, to join
    /// `autoRenewables` once the App Store's are judged.
    mutating func evaluateGooglePlay(ledger: SubscriberLedger, catalog: Catalog, environment: Environment?) -> [AutoRenewable] {
        guard !ledger.playPurchases.isEmpty else { return [] }
        var subscriptions: [AutoRenewable] = []
        for token in ledger.playTokens(environment: environment) {
            guard let play = Self.playEvaluation(token, ledger: ledger, catalog: catalog, at: at, environment: environment) else { continue }
            let latest = play.latest
            var fact = TransactionFact(
                transactionID: latest.orderID ?? token, originalTransactionID: token, productID: play.product.id,
                productType: play.product.type, group: play.product.group, purchaseDate: latest.startTime,
                expiresDate: play.product.type == .autoRenewable ? play.end : nil, quantity: latest.quantity,
                autoRenew: latest.autoRenew, environment: latest.environment, source: latest.source)
            fact.store = .googlePlay
            if let sale = latest.sale { fact.details.sale = sale }
            var transaction = Transaction(fact: fact, position: play.positions.max() ?? 0, type: play.product.type,
                                          group: play.product.group, duration: nil, refund: nil)
            if let revokedAt = play.revokedAt {
                transaction.refund = SubscriberLedger.Dated(
                    date: revokedAt, position: play.positions.max() ?? 0,
                    value: RefundFact(transactionID: fact.transactionID, originalTransactionID: token, productID: play.product.id,
                                      revocationDate: revokedAt, reason: "voided by Google Play", environment: latest.environment,
                                      source: latest.source))
            }
            if play.product.type == .autoRenewable {
                subscriptions.append(AutoRenewable(
                    latest: transaction, group: play.product.group, status: play.status, end: play.end, graceEnd: play.graceEnd,
                    autoRenew: play.autoRenew, expiredByStore: nil, positions: play.positions, playReason: play.reason,
                    playState: latest.state))
            } else if play.status == .active || play.status == .revoked {
                transactions.append(transaction)
            }
        }
        return subscriptions
    }
}
