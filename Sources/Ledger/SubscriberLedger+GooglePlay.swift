import Foundation

// What a ledger knows of Google Play's purchases (the rules that read it are
// in `Evaluation+GooglePlay.swift`).
extension SubscriberLedger {
    /// Whether the subscriber currently holds the Play purchase `token` of
    /// `environment`: a state of it was recorded here and its last
    /// transfer, if any, was into this subscriber.
    public func holds(playToken token: String, environment: Environment) -> Bool {
        let key = Store.googlePlay.ownershipKey(token, environment: environment)
        guard playPurchases[token]?.contains(where: { $0.value.environment == environment }) == true || ownership[key] != nil else {
            return false
        }
        return holdsAfterLastMove(key: key)
    }

    /// The Play purchase tokens of `environment` (nil: any) this ledger holds facts of.
    func playTokens(environment: Environment?) -> [String] {
        playPurchases.compactMap { token, states in
            states.contains { environment == nil || $0.value.environment == environment } ? token : nil
        }.sorted()
    }

    /// The start of the purchase that replaced `token` (its
    /// `linkedPurchaseToken` names `token`), as known at `at`.
    func playReplacement(of token: String, at: Date) -> (date: Date, by: String, position: Int64)? {
        var found: (date: Date, by: String, position: Int64)?
        for (other, states) in playPurchases where other != token {
            for state in states where state.value.linkedPurchaseToken == token {
                let start = state.value.startTime
                guard min(start, state.date) <= at, found.map({ start < $0.date }) ?? true else { continue }
                found = (start, other, state.position)
            }
        }
        return found
    }
}
