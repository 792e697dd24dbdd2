import Foundation
import JSON
import Testing
@testable import Ledger

/// `mappingPersonalFields` passes on exactly the fields that name a person,
/// checked against the stored JSON by key name, independently of how the
/// mapping is written.
@Suite struct PersonalFieldTests {
    /// The keys of stored event data that hold a subscriber id, a device id
    /// or an id embedding a subscriber id.
    static let personalKeys: Set<String> = ["deviceId", "fromSubscriberId", "toSubscriberId", "reminderId"]

    @Test func everyPersonalFieldAndNothingElseIsMapped() throws {
        var generator = EventGenerator(seed: 36)
        for round in 0..<3_000 {
            let type = LedgerEventType.allCases[round % LedgerEventType.allCases.count]
            let event = generator.event(type)
            let mapped = event.mappingPersonalFields { _ in "\u{1F}mapped" }
            let original = try parse(event.encodedData())
            let stored = try parse(mapped.encodedData())
            try compare(original, stored, key: nil)
        }
    }

    @Test func theIdentityChangesNothingAndTheInverseRestores() throws {
        var generator = EventGenerator(seed: 3_600)
        for round in 0..<3_000 {
            let type = LedgerEventType.allCases[round % LedgerEventType.allCases.count]
            let event = generator.event(type)
            #expect(event.mappingPersonalFields { $0 } == event)
            let hidden = event.mappingPersonalFields { "<" + $0 + ">" }
            #expect(hidden.mappingPersonalFields { String($0.dropFirst().dropLast()) } == event)
            let decoded = try LedgerEvent.decode(type: hidden.type, schemaVersion: hidden.schemaVersion, data: hidden.encodedData())
            #expect(decoded == hidden)
        }
    }

    @Test func personalFieldsAreFoundWhereTheyExist() {
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let fact = TransactionFact(transactionID: "t1", originalTransactionID: "t1", productID: "p", purchaseDate: date)
        #expect(!LedgerEvent.purchased(fact).hasPersonalFields)
        var withDevice = fact
        withDevice.deviceID = "device-1"
        #expect(LedgerEvent.purchased(withDevice).hasPersonalFields)
        #expect(LedgerEvent.deviceSeen(DeviceSeen(deviceID: "d", date: date, source: FactSource.api)).hasPersonalFields)
        let expiry = ExpiryFact(originalTransactionID: "t1", group: "g", productID: "p", expiresDate: date, reason: nil,
                                environment: .production, source: FactSource.subledger)
        #expect(!LedgerEvent.expired(expiry).hasPersonalFields)
    }

    private func parse(_ data: Data) throws -> JSONValue {
        guard case .success(let value) = JSONValue.parse(data) else { throw ParseFailure() }
        return value
    }

    private struct ParseFailure: Error {}

    /// Walks both payloads together: strings under a personal key are the
    /// mapped marker, every other value is unchanged.
    private func compare(_ original: JSONValue, _ stored: JSONValue, key: String?) throws {
        switch (original, stored) {
        case (.object(let left), .object(let right)):
            #expect(Set(left.keys) == Set(right.keys))
            for (name, value) in left {
                if let other = right[name] { try compare(value, other, key: name) }
            }
        case (.array(let left), .array(let right)):
            #expect(left.count == right.count)
            for (value, other) in zip(left, right) { try compare(value, other, key: key) }
        case (.string, .string(let mapped)) where key.map(Self.personalKeys.contains) == true:
            #expect(mapped == "\u{1F}mapped", "\(key ?? "") is personal and must be mapped")
        default:
            #expect(original == stored, "\(key ?? "") is not personal and must be kept")
        }
    }
}
