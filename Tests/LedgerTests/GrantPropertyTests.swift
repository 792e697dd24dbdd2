import Foundation
import JSON
import TestSupport
import Testing
@testable import Ledger

/// Support grants over generated histories: a grant's entitlement is active
/// at an instant exactly when the instant lies in [start, end), the end cut
/// to the revocation's instant once that revocation is dated at or before
/// the instant asked about. Checked at many instants of each of hundreds of
/// seeded histories, and with every other reader of a ledger (read-model
/// intervals, `nextChange`, snapshots, the stored JSON) agreeing.
struct GrantPropertyTests {
    static let histories = 300
    static let actor = ActorStamp(role: "admin", keyFingerprint: "0123456789ab", actor: "Ann")

    struct Model {
        var entitlement: String
        var start: Date
        var end: Date
        var revokedAt: Date?

        /// Whether the grant gives its entitlement at `at`, as the contract says.
        func isActive(at: Date) -> Bool {
            guard start <= at else { return false }
            if let revokedAt, revokedAt <= at { return at < min(end, revokedAt) }
            return at < end
        }
    }

    @Test func aGrantIsActiveExactlyFromItsStartToItsEndOrRevocationAsOfAnyInstant() throws {
        let decider = Decider(catalog: catalog)
        let entitlements = catalog.entitlementIDs
        for seed in 0..<UInt64(Self.histories) {
            var random = SplitMix64(seed: seed)
            func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
            var now = date("2025-01-01T00:00:00Z") + TimeInterval(int(0...86_400 * 30))
            var ledger = SubscriberLedger(subscriberID: "s")
            var events: [RecordedLedgerEvent] = []
            var models: [String: Model] = [:]
            var order: [String] = []
            for step in 0..<int(1...12) {
                now += TimeInterval(int(0...86_400 * 20)) + (int(0...3) == 0 ? 0.001 * Double(int(1...999)) : 0)
                now = RFC3339.date(milliseconds: RFC3339.milliseconds(of: now))
                let decision: Decision
                if !order.isEmpty, int(0...2) == 0 {
                    let id = order[int(0...order.count - 1)]
                    decision = try decider.decide(GrantRevocationRequest(grantID: id, reason: int(0...1) == 0 ? nil : "done"),
                                                  by: Self.actor, ledger: ledger, now: now)
                    if models[id]!.revokedAt == nil {
                        #expect(!decision.isDuplicate)
                        models[id]!.revokedAt = now
                    } else {
                        #expect(decision.isDuplicate, "seed \(seed): a second revocation of \(id) was not a duplicate")
                    }
                } else {
                    let id = "g\(step)"
                    let entitlement = entitlements[int(0...entitlements.count - 1)]
                    let length: GrantRequest.Length = int(0...1) == 0
                        ? .duration(ISODuration(months: int(0...2), weeks: int(0...2), days: int(1...40)))
                        : .endsAt(now + TimeInterval(int(1...86_400 * 90)))
                    decision = try decider.decide(GrantRequest(entitlement: entitlement, length: length, reason: "r\(step)"),
                                                  grantID: id, by: Self.actor, ledger: ledger, now: now)
                    let end: Date = switch length {
                    case .duration(let duration): duration.added(to: now)
                    case .endsAt(let date): date
                    }
                    models[id] = Model(entitlement: entitlement, start: now, end: end)
                    order.append(id)
                }
                for event in decision.events {
                    // What is stored is what is read back.
                    let stored = try LedgerEvent.decodeFast(type: event.type, schemaVersion: event.schemaVersion, data: try event.encodedData())
                    #expect(stored == event, "seed \(seed)")
                    let recorded = RecordedLedgerEvent(position: Int64(events.count + 1), recordedAt: now, event: stored)
                    events.append(recorded)
                    ledger.apply(recorded)
                }
            }
            #expect(try SubscriberLedger(snapshot: ledger.snapshotData()) == ledger, "seed \(seed): snapshot")
            let model = ledger.readModel(catalog: catalog)

            // Instants: every start, end and revocation, a millisecond either side, and random ones.
            var instants: [Date] = []
            for grant in models.values {
                for edge in [grant.start, grant.end] + (grant.revokedAt.map { [$0] } ?? []) {
                    instants += [edge - 0.001, edge, edge + 0.001]
                }
            }
            for _ in 0..<20 { instants.append(date("2025-01-01T00:00:00Z") + TimeInterval(int(0...86_400 * 400))) }
            for at in instants {
                let state = ledger.state(at: at, catalog: catalog)
                for entitlement in entitlements {
                    let expected = models.values.contains { $0.entitlement == entitlement && $0.isActive(at: at) }
                    let shown = state.entitlements.first { $0.id == entitlement }
                    #expect((shown?.active ?? false) == expected, "seed \(seed): \(entitlement) at \(RFC3339.format(at))")
                    if let shown {
                        #expect(shown.source.hasPrefix("grant:"))
                        #expect(shown.productID == "")
                    }
                    if expected, let shown {
                        // The grant shown is one active at `at`, ending when it says.
                        let id = String(shown.source.dropFirst("grant:".count))
                        let grant = try #require(models[id])
                        #expect(grant.isActive(at: at))
                        let end = grant.revokedAt.map { $0 <= at ? min(grant.end, $0) : grant.end } ?? grant.end
                        #expect(shown.expiresAt == end, "seed \(seed)")
                    }
                    // The read model's stretches, which know every fact, agree
                    // with a state at instants after the last fact.
                    if at > (events.last?.recordedAt ?? at) {
                        let inInterval = model.entitlements.contains {
                            $0.entitlement == entitlement && $0.start <= at && at < ($0.end ?? .distantFuture)
                        }
                        #expect(inInterval == expected, "seed \(seed): read model for \(entitlement) at \(RFC3339.format(at))")
                    }
                }
                // Nothing changes before the next change the ledger announces.
                if let next = ledger.nextChange(after: at, catalog: catalog), next.timeIntervalSince(at) > 0.002 {
                    var later = ledger.state(at: next - 0.001, catalog: catalog)
                    later.at = state.at
                    #expect(later == state, "seed \(seed): state changed before \(RFC3339.format(next))")
                } else if ledger.nextChange(after: at, catalog: catalog) == nil {
                    var later = ledger.state(at: at + 86_400 * 3650, catalog: catalog)
                    later.at = state.at
                    #expect(later == state, "seed \(seed): state changed though no change was announced")
                }
            }
            // The history tells who and why.
            for event in events {
                if case .granted(let grant) = event.event {
                    #expect(event.event.summary.contains("Ann (admin, key 0123456789ab)") && event.event.summary.contains(grant.reason))
                }
            }
        }
    }

    @Test func grantsBelongToProductionOnly() throws {
        let decider = Decider(catalog: catalog)
        let now = date("2025-03-01T00:00:00Z")
        let decision = try decider.decide(GrantRequest(entitlement: "pro", length: .duration(ISODuration(days: 30)), reason: "x"),
                                          grantID: "g", by: Self.actor, ledger: SubscriberLedger(subscriberID: "s"), now: now)
        let ledger = SubscriberLedger(subscriberID: "s", events: decision.events.enumerated().map {
            RecordedLedgerEvent(position: Int64($0.offset + 1), recordedAt: now, event: $0.element)
        })
        #expect(ledger.state(at: now + 60, catalog: catalog).activeEntitlementIDs == ["pro"])
        #expect(ledger.state(at: now + 60, catalog: catalog, environment: .sandbox).entitlements.isEmpty)
        #expect(Coverage.ends(of: ledger, catalog: catalog, now: now + 60).isEmpty)
        #expect(throws: LedgerError.self) {
            try decider.decide(GrantRevocationRequest(grantID: "other", reason: nil), by: Self.actor, ledger: ledger, now: now)
        }
    }
}
